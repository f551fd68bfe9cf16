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
import type { ResponseObject, ResponsesContentPart, ResponsesItem, ResponsesRequest } from '../responsesTypes';
import { ApiError } from '../../errors';

/**
 * Chat Completions <-> OpenAI Responses for a Responses-only upstream (a model marked `api: "responses"`), so the
 * Messages interface (which translates through chat) also runs on such models: chat request -> Responses request
 * (stateless: store false, whole history as input), Responses object -> chat completion, and Responses SSE events
 * -> chat chunks.
 */

function parts(content: string | ChatContentPart[] | null, role: 'user' | 'assistant'): ResponsesContentPart[] {
  if (content == null) return [];
  const textType = role === 'assistant' ? 'output_text' : 'input_text';
  if (typeof content === 'string') return content ? [{ type: textType, text: content }] : [];
  return content.map((p) =>
    p.type === 'text'
      ? { type: textType, text: p.text }
      : { type: 'input_image', image_url: p.image_url.url, detail: p.image_url.detail ?? 'auto' },
  );
}

function text(content: ChatMessage['content']): string {
  if (typeof content === 'string') return content;
  return (content ?? []).map((p) => (p.type === 'text' ? p.text : '')).join('\n');
}

export function chatToResponsesRequest(chat: ChatRequest): ResponsesRequest {
  // The Responses API has no stop sequences; refused as OpenAI refuses `stop` on its reasoning models, rather than
  // answering past the point the client asked to stop at.
  if (chat.stop?.length)
    throw new ApiError(
      400,
      'Stop sequences are not supported with this model: remove `stop` (`stop_sequences` on /v1/messages).',
      'invalid_request_error',
      'stop',
      'unsupported_parameter',
    );
  const input: ResponsesItem[] = [];
  const instructions: string[] = [];
  for (const m of chat.messages) {
    if (m.role === 'system') {
      if (input.length === 0) instructions.push(text(m.content));
      else input.push({ type: 'message', role: 'developer', content: [{ type: 'input_text', text: text(m.content) }] });
    } else if (m.role === 'user') input.push({ type: 'message', role: 'user', content: parts(m.content, 'user') });
    else if (m.role === 'assistant') {
      const p = parts(m.content, 'assistant');
      if (p.length) input.push({ type: 'message', role: 'assistant', content: p });
      for (const tc of m.tool_calls ?? [])
        input.push({
          type: 'function_call',
          call_id: tc.id,
          name: tc.function.name,
          arguments: tc.function.arguments ?? '',
        });
    } else if (m.role === 'tool') {
      input.push({
        type: 'function_call_output',
        call_id: m.tool_call_id,
        output: typeof m.content === 'string' ? m.content : parts(m.content, 'user'),
      });
    }
  }
  const req: ResponsesRequest = { model: chat.model, input, store: false };
  if (instructions.length) req.instructions = instructions.join('\n\n');
  if (chat.tools?.length) {
    req.tools = chat.tools.map((t) => ({
      type: 'function',
      name: t.function.name,
      ...(t.function.description ? { description: t.function.description } : {}),
      parameters: t.function.parameters ?? { type: 'object', properties: {} },
      strict: t.function.strict ?? false,
    }));
    const tc = chat.tool_choice;
    if (typeof tc === 'string') req.tool_choice = tc;
    else if (tc) req.tool_choice = { type: 'function', name: tc.function.name };
    if (typeof chat.parallel_tool_calls === 'boolean') req.parallel_tool_calls = chat.parallel_tool_calls;
  }
  const max = chat.max_completion_tokens ?? chat.max_tokens;
  if (max) req.max_output_tokens = max;
  if (typeof chat.temperature === 'number') req.temperature = chat.temperature;
  if (typeof chat.top_p === 'number') req.top_p = chat.top_p;
  if (chat.reasoning_effort) req.reasoning = { effort: chat.reasoning_effort };
  if (chat.user) req.user = chat.user;
  const rf = chat.response_format as
    | { type?: unknown; json_schema?: { name?: string; schema?: unknown; strict?: boolean; description?: string } }
    | undefined;
  if (rf?.type === 'json_object') req.text = { format: { type: 'json_object' } };
  else if (rf?.type === 'json_schema')
    req.text = {
      format: {
        type: 'json_schema',
        name: rf.json_schema?.name ?? 'response',
        schema: rf.json_schema?.schema ?? {},
        ...(rf.json_schema?.strict !== undefined ? { strict: rf.json_schema.strict } : {}),
        ...(rf.json_schema?.description ? { description: rf.json_schema.description } : {}),
      },
    };
  if (chat.stream) req.stream = true;
  return req;
}

function usageOf(u: ResponseObject['usage'] | undefined): ChatUsage {
  const input = u?.input_tokens ?? 0;
  const output = u?.output_tokens ?? 0;
  return {
    prompt_tokens: input,
    completion_tokens: output,
    total_tokens: u?.total_tokens ?? input + output,
    prompt_tokens_details: { cached_tokens: u?.input_tokens_details?.cached_tokens ?? 0 },
    completion_tokens_details: { reasoning_tokens: u?.output_tokens_details?.reasoning_tokens ?? 0 },
  };
}

function finishOf(r: Pick<ResponseObject, 'status' | 'incomplete_details'>, sawCall: boolean): ChatFinishReason {
  if (r.status === 'incomplete') return r.incomplete_details?.reason === 'content_filter' ? 'content_filter' : 'length';
  return sawCall ? 'tool_calls' : 'stop';
}

function reasoningText(item: ResponsesItem): string {
  const fromContent = Array.isArray(item.content) ? item.content.map((p) => p.text ?? '').join('') : '';
  return fromContent || (item.summary ?? []).map((p) => p.text ?? '').join('\n');
}

export function responsesToChatCompletion(r: ResponseObject): ChatCompletion {
  let content = '';
  let reasoning = '';
  const calls: ChatToolCall[] = [];
  for (const item of r.output ?? []) {
    if (item.type === 'message' && Array.isArray(item.content))
      content += item.content.map((p) => p.text ?? p.refusal ?? '').join('');
    else if (item.type === 'reasoning') reasoning += reasoningText(item);
    else if (item.type === 'function_call')
      calls.push({
        id: String(item.call_id ?? item.id ?? ''),
        type: 'function',
        function: { name: String(item.name ?? ''), arguments: String(item.arguments ?? '') },
      });
  }
  return {
    id: r.id,
    object: 'chat.completion',
    created: r.created_at ?? Math.floor(Date.now() / 1000),
    model: r.model,
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          refusal: null,
          content: content || null,
          ...(calls.length ? { tool_calls: calls } : {}),
          ...(reasoning ? { reasoning_content: reasoning } : {}),
        },
        finish_reason: finishOf(r, calls.length > 0),
        logprobs: null,
      },
    ],
    usage: usageOf(r.usage),
  };
}

export class ResponsesStreamError extends Error {}

/** Responses SSE event (parsed `data`) -> chat chunks. response.failed / error throw ResponsesStreamError. */
export class ResponsesStreamToChat {
  private id = 'chatcmpl-responses';
  private model = '';
  private toolByItem = new Map<string, number>();
  private toolByOutput = new Map<number, number>();
  private argsSeen = new Set<number>();

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
    const tool = () =>
      typeof e.item_id === 'string' && this.toolByItem.has(e.item_id)
        ? this.toolByItem.get(e.item_id)
        : this.toolByOutput.get(e.output_index);
    switch (e.type) {
      case 'response.created':
        this.id = e.response?.id ?? this.id;
        this.model = e.response?.model ?? '';
        return [chunk({ role: 'assistant', content: '' })];
      case 'response.output_item.added': {
        const item = e.item ?? {};
        if (item.type !== 'function_call') return [];
        const ti = this.toolByOutput.size;
        this.toolByOutput.set(e.output_index, ti);
        if (typeof item.id === 'string') this.toolByItem.set(item.id, ti);
        return [
          chunk({
            tool_calls: [
              {
                index: ti,
                id: item.call_id,
                type: 'function',
                function: { name: item.name, arguments: item.arguments ?? '' },
              },
            ],
          }),
        ];
      }
      case 'response.output_text.delta':
        return e.delta ? [chunk({ content: e.delta })] : [];
      case 'response.reasoning_text.delta':
      case 'response.reasoning_summary_text.delta':
        return e.delta ? [chunk({ reasoning_content: e.delta })] : [];
      case 'response.function_call_arguments.delta': {
        const ti = tool();
        if (ti === undefined || !e.delta) return [];
        this.argsSeen.add(ti);
        return [chunk({ tool_calls: [{ index: ti, function: { arguments: e.delta } }] })];
      }
      case 'response.function_call_arguments.done': {
        // An upstream that sends the arguments only whole.
        const ti = tool();
        if (ti === undefined || this.argsSeen.has(ti) || !e.arguments) return [];
        this.argsSeen.add(ti);
        return [chunk({ tool_calls: [{ index: ti, function: { arguments: e.arguments } }] })];
      }
      case 'response.completed':
      case 'response.incomplete': {
        const r = e.response ?? {};
        return [
          chunk({}, finishOf(r, this.toolByOutput.size > 0)),
          {
            id: this.id,
            object: 'chat.completion.chunk',
            created: 0,
            model: this.model,
            choices: [],
            usage: usageOf(r.usage),
          },
        ];
      }
      case 'response.failed':
        throw new ResponsesStreamError(String(e.response?.error?.message ?? 'upstream response failed'));
      case 'error':
        throw new ResponsesStreamError(String(e.message ?? 'upstream error'));
      default:
        return [];
    }
  }
}
