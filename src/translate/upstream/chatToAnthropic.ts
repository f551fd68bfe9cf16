import type {
  ChatChunk,
  ChatCompletion,
  ChatContentPart,
  ChatFinishReason,
  ChatMessage,
  ChatRequest,
  ChatToolCall,
  ChatUsage,
} from '../chatTypes';
import type {
  AnthropicContentBlock,
  AnthropicImageBlock,
  AnthropicMessage,
  AnthropicTextBlock,
  AnthropicTool,
  AnthropicToolChoice,
  MessagesRequest,
  MessagesResponse,
} from '../anthropicTypes';
import { parseToolInput } from '../client/chatToMessages';

/**
 * Chat Completions <-> Anthropic Messages for an Anthropic-protocol upstream, so the Responses interface (which
 * translates through chat) also runs on Claude models: chat request -> Messages request, Messages response ->
 * chat completion, and Messages SSE events -> chat chunks.
 */

function imageBlock(url: string): AnthropicImageBlock {
  const m = /^data:([^;,]+);base64,(.*)$/s.exec(url);
  if (m) return { type: 'image', source: { type: 'base64', media_type: m[1], data: m[2] } };
  return { type: 'image', source: { type: 'url', url } };
}

function blocksOf(content: string | ChatContentPart[] | null | undefined): AnthropicContentBlock[] {
  if (content == null) return [];
  if (typeof content === 'string') return content ? [{ type: 'text', text: content }] : [];
  return content.map((p): AnthropicContentBlock => {
    const cache = p.cache_control === undefined ? {} : { cache_control: p.cache_control };
    return p.type === 'text' ? { type: 'text', text: p.text, ...cache } : { ...imageBlock(p.image_url.url), ...cache };
  });
}

function textOf(content: ChatMessage['content']): string {
  if (typeof content === 'string') return content;
  return (content ?? []).map((p) => (p.type === 'text' ? p.text : '')).join('\n');
}

/**
 * Chat's JSON mode (response_format) for an upstream without one: an instruction appended to the system prompt
 * (json_schema: with the schema). Claude models follow it; the answer is not validated against the schema.
 */
function jsonInstruction(rf: unknown): string | null {
  const f = rf as { type?: unknown; json_schema?: { schema?: unknown } } | null | undefined;
  if (f?.type === 'json_object') return 'Respond with a single valid JSON object and no other text.';
  if (f?.type === 'json_schema')
    return (
      'Respond with a single valid JSON object that matches this JSON schema, and no other text:\n' +
      JSON.stringify(f.json_schema?.schema ?? {})
    );
  return null;
}

export function chatToAnthropicRequest(chat: ChatRequest, opts: { defaultMaxTokens: number }): MessagesRequest {
  const system: AnthropicTextBlock[] = [];
  const messages: AnthropicMessage[] = [];
  const push = (role: 'user' | 'assistant', blocks: AnthropicContentBlock[]) => {
    if (!blocks.length) return;
    const last = messages[messages.length - 1];
    // Anthropic alternates roles: consecutive messages of one role (tool results, then text) form one turn.
    if (last && last.role === role && Array.isArray(last.content)) last.content.push(...blocks);
    else messages.push({ role, content: blocks });
  };
  for (const m of chat.messages) {
    if (m.role === 'system') {
      // Leading system messages are the system prompt; later ones stay in place as marked user text.
      if (messages.length === 0) system.push(...(blocksOf(m.content) as AnthropicTextBlock[]));
      else push('user', [{ type: 'text', text: `<system>\n${textOf(m.content)}\n</system>` }]);
    } else if (m.role === 'user') push('user', blocksOf(m.content));
    else if (m.role === 'assistant') {
      const blocks = blocksOf(m.content);
      for (const tc of m.tool_calls ?? [])
        blocks.push({
          type: 'tool_use',
          id: tc.id,
          name: tc.function.name,
          input: parseToolInput(tc.function.arguments ?? ''),
        });
      push('assistant', blocks);
    } else if (m.role === 'tool') {
      const content =
        typeof m.content === 'string'
          ? m.content
          : (blocksOf(m.content) as (AnthropicTextBlock | AnthropicImageBlock)[]);
      push('user', [{ type: 'tool_result', tool_use_id: m.tool_call_id, content }]);
    }
  }
  if (messages.length === 0 || messages[0].role !== 'user')
    messages.unshift({ role: 'user', content: [{ type: 'text', text: '(continue)' }] });

  const req: MessagesRequest = {
    model: chat.model,
    max_tokens: chat.max_tokens ?? chat.max_completion_tokens ?? opts.defaultMaxTokens,
    messages,
  };
  const json = jsonInstruction(chat.response_format);
  if (json) system.push({ type: 'text', text: json });
  // System blocks only when a client put a cache breakpoint on one; otherwise one string.
  if (system.some((b) => b.cache_control !== undefined)) req.system = system;
  else if (system.length) req.system = system.map((b) => b.text).join('\n\n');
  if (chat.tools?.length) {
    req.tools = chat.tools.map((t): AnthropicTool => ({
      name: t.function.name,
      ...(t.function.description ? { description: t.function.description } : {}),
      input_schema: t.function.parameters ?? { type: 'object', properties: {} },
    }));
    let choice: AnthropicToolChoice | undefined;
    const tc = chat.tool_choice;
    if (tc === 'auto') choice = { type: 'auto' };
    else if (tc === 'required') choice = { type: 'any' };
    else if (tc === 'none') choice = { type: 'none' };
    else if (tc && typeof tc === 'object') choice = { type: 'tool', name: tc.function.name };
    if (chat.parallel_tool_calls === false)
      choice = { ...(choice ?? { type: 'auto' }), disable_parallel_tool_use: true };
    if (choice) req.tool_choice = choice;
  }
  if (chat.stop?.length) req.stop_sequences = chat.stop;
  if (typeof chat.temperature === 'number') req.temperature = Math.min(1, chat.temperature);
  if (typeof chat.top_p === 'number') req.top_p = chat.top_p;
  if (chat.user) req.metadata = { user_id: chat.user };
  if (chat.stream) req.stream = true;
  return req;
}

export function finishOf(stop: string | null | undefined): ChatFinishReason {
  switch (stop) {
    case 'max_tokens':
    case 'model_context_window_exceeded':
      return 'length';
    case 'tool_use':
      return 'tool_calls';
    case 'refusal':
      return 'content_filter';
    default:
      return 'stop';
  }
}

interface AnthropicUsageLike {
  input_tokens?: number | null;
  output_tokens?: number | null;
  cache_read_input_tokens?: number | null;
  cache_creation_input_tokens?: number | null;
  cache_creation?: { ephemeral_5m_input_tokens?: number; ephemeral_1h_input_tokens?: number } | null;
}

/** Anthropic usage in chat's shape: every input token in prompt_tokens, cache reads and writes in its details. */
function chatUsage(u: AnthropicUsageLike): ChatUsage {
  const cached = u.cache_read_input_tokens ?? 0;
  const written = u.cache_creation_input_tokens ?? 0;
  const written1h = Math.min(written, u.cache_creation?.ephemeral_1h_input_tokens ?? 0);
  const prompt = (u.input_tokens ?? 0) + cached + written;
  const completion = u.output_tokens ?? 0;
  const details: NonNullable<ChatUsage['prompt_tokens_details']> = { cached_tokens: cached };
  if (written) details.cache_write_tokens = written;
  if (written1h) details.cache_write_1h_tokens = written1h;
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    prompt_tokens_details: details,
    completion_tokens_details: { reasoning_tokens: 0 },
  };
}

export function anthropicToChatCompletion(m: MessagesResponse): ChatCompletion {
  let text = '';
  let reasoning = '';
  const calls: ChatToolCall[] = [];
  for (const b of m.content ?? []) {
    if (b.type === 'text') text += b.text;
    else if (b.type === 'thinking') reasoning += b.thinking;
    else if (b.type === 'tool_use')
      calls.push({ id: b.id, type: 'function', function: { name: b.name, arguments: JSON.stringify(b.input ?? {}) } });
  }
  return {
    id: m.id,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: m.model,
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          refusal: null,
          content: text || null,
          ...(calls.length ? { tool_calls: calls } : {}),
          ...(reasoning ? { reasoning_content: reasoning } : {}),
        },
        finish_reason: finishOf(m.stop_reason),
        logprobs: null,
      },
    ],
    usage: chatUsage(m.usage ?? { input_tokens: 0, output_tokens: 0 }),
  };
}

/** Anthropic stream event (parsed `data`) -> chat chunks. An `error` event throws AnthropicStreamError. */
export class AnthropicStreamToChat {
  private id = 'chatcmpl-anthropic';
  private model = '';
  private usage: AnthropicUsageLike = {};
  private toolIndexByBlock = new Map<number, number>();
  private nextTool = 0;

  push(e: { type?: string; [k: string]: any }): ChatChunk[] {
    const chunk = (
      delta: NonNullable<ChatChunk['choices']>[number]['delta'],
      finish: ChatFinishReason = null,
    ): ChatChunk => ({
      id: this.id,
      object: 'chat.completion.chunk',
      created: 0,
      model: this.model,
      choices: [{ index: 0, delta, finish_reason: finish }],
    });
    switch (e.type) {
      case 'message_start':
        this.id = e.message?.id ?? this.id;
        this.model = e.message?.model ?? '';
        this.usage = { ...(e.message?.usage ?? {}) };
        return [chunk({ role: 'assistant', content: '' })];
      case 'content_block_start': {
        const b = e.content_block ?? {};
        if (b.type !== 'tool_use') return [];
        const ti = this.nextTool++;
        this.toolIndexByBlock.set(e.index, ti);
        return [
          chunk({ tool_calls: [{ index: ti, id: b.id, type: 'function', function: { name: b.name, arguments: '' } }] }),
        ];
      }
      case 'content_block_delta': {
        const d = e.delta ?? {};
        if (d.type === 'text_delta') return [chunk({ content: d.text })];
        if (d.type === 'thinking_delta') return [chunk({ reasoning_content: d.thinking })];
        if (d.type === 'input_json_delta' && d.partial_json) {
          const ti = this.toolIndexByBlock.get(e.index);
          return ti === undefined
            ? []
            : [chunk({ tool_calls: [{ index: ti, function: { arguments: d.partial_json } }] })];
        }
        return [];
      }
      case 'message_delta':
        for (const [k, v] of Object.entries(e.usage ?? {}))
          if (typeof v === 'number' || (k === 'cache_creation' && v && typeof v === 'object'))
            (this.usage as Record<string, unknown>)[k] = v;
        return [chunk({}, finishOf(e.delta?.stop_reason))];
      case 'message_stop':
        return [
          {
            id: this.id,
            object: 'chat.completion.chunk',
            created: 0,
            model: this.model,
            choices: [],
            usage: chatUsage(this.usage),
          },
        ];
      case 'error':
        throw new AnthropicStreamError(
          String(e.error?.type ?? 'api_error'),
          String(e.error?.message ?? 'upstream error'),
        );
      default:
        return [];
    }
  }
}

export class AnthropicStreamError extends Error {
  constructor(
    readonly type: string,
    message: string,
  ) {
    super(message);
  }
}
