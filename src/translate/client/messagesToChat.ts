import type {
  ChatContentPart,
  ChatFunctionTool,
  ChatMessage,
  ChatRequest,
  ChatTextPart,
  ChatToolCall,
  ChatToolChoice,
} from '../chatTypes';
import type {
  AnthropicContentBlock,
  AnthropicImageBlock,
  AnthropicToolResultBlock,
  MessagesRequest,
} from '../anthropicTypes';
import { ToolNameMap } from '../toolNames';

/**
 * Anthropic Messages request -> Chat Completions request (reference 4.1). Fields a chat upstream has no use for
 * (cache_control, defer_loading, context_management, output_config, thinking blocks, server tools) are accepted
 * and stripped; nothing the client sends makes the translation fail.
 */

export interface ChatTranslation {
  chat: ChatRequest;
  tools: ToolNameMap;
}

export interface TranslateOptions {
  upstreamModel: string;
  /** The model's output cap: max_tokens above it is lowered (coding clients ask for up to 128k). */
  maxOutputTokens?: number;
  /**
   * A reasoning model: thinking / effort settings become reasoning_effort and the cap is sent as
   * max_completion_tokens. Other chat models reject both (OpenAI answers 400), so they get neither.
   */
  reasoning?: boolean;
}

/** Puts the output cap and the effort on a chat request the way the upstream model takes them. */
export function applyLimits(
  chat: ChatRequest,
  max: number | undefined,
  effort: ChatRequest['reasoning_effort'],
  opts: TranslateOptions,
): void {
  if (max !== undefined && Number.isInteger(max) && max > 0) {
    const capped = opts.maxOutputTokens ? Math.min(max, opts.maxOutputTokens) : max;
    if (opts.reasoning) chat.max_completion_tokens = capped;
    else chat.max_tokens = capped;
  }
  if (effort && opts.reasoning) chat.reasoning_effort = effort;
}

export function imageUrlOf(b: AnthropicImageBlock): string | null {
  const s = b.source as { type?: string; media_type?: string; data?: string; url?: string } | undefined;
  if (s?.type === 'base64' && typeof s.data === 'string') return `data:${s.media_type ?? 'image/png'};base64,${s.data}`;
  if (s?.type === 'url' && typeof s.url === 'string') return s.url;
  return null;
}

function textOfDocument(b: { source?: { type?: string; data?: string }; title?: string }): string {
  if (b.source?.type === 'text' && typeof b.source.data === 'string')
    return b.title ? `${b.title}\n${b.source.data}` : b.source.data;
  return `[document${b.title ? ` "${b.title}"` : ''} omitted: not supported by this model]`;
}

/** Text and image blocks -> chat parts (other block kinds are not user content and are skipped). */
function userParts(blocks: AnthropicContentBlock[]): ChatContentPart[] {
  const parts: ChatContentPart[] = [];
  if (!Array.isArray(blocks)) return parts;
  for (const b of blocks) {
    if (!b || typeof b !== 'object') continue;
    if (b.type === 'text') parts.push({ type: 'text', text: str(b.text) });
    else if (b.type === 'image') {
      const url = imageUrlOf(b);
      if (url) parts.push({ type: 'image_url', image_url: { url } });
    } else if (b.type === 'document') parts.push({ type: 'text', text: textOfDocument(b) });
  }
  return parts;
}

/** Text fields of client blocks, whatever was sent in them. */
export function str(v: unknown): string {
  return typeof v === 'string' ? v : v === undefined || v === null ? '' : JSON.stringify(v);
}

/** Plain string when the parts are all text (what every chat upstream accepts), else the part list. */
function compact(parts: ChatContentPart[]): string | ChatContentPart[] {
  if (parts.every((p) => p.type === 'text')) return (parts as ChatTextPart[]).map((p) => p.text).join('\n');
  return parts;
}

function toolResultContent(b: AnthropicToolResultBlock): string | ChatContentPart[] {
  let content: string | ChatContentPart[];
  if (b.content === undefined) content = '';
  else if (typeof b.content === 'string') content = b.content;
  else if (Array.isArray(b.content)) content = compact(userParts(b.content as AnthropicContentBlock[]));
  else content = str(b.content);
  if (b.is_error) {
    if (typeof content === 'string') content = `[tool error] ${content}`;
    else content = [{ type: 'text', text: '[tool error]' }, ...content];
  }
  return content;
}

function systemText(system: MessagesRequest['system']): string {
  if (typeof system === 'string') return system;
  if (Array.isArray(system))
    return system
      .filter((b) => b && b.type === 'text')
      .map((b) => str(b.text))
      .join('\n');
  return '';
}

export function effortFromBudget(budget: number | undefined): 'low' | 'medium' | 'high' {
  if (budget === undefined) return 'medium';
  if (budget < 4096) return 'low';
  if (budget < 16384) return 'medium';
  return 'high';
}

export function normalizeEffort(e: unknown): 'minimal' | 'low' | 'medium' | 'high' | undefined {
  switch (e) {
    case 'minimal':
    case 'low':
    case 'medium':
    case 'high':
      return e;
    case 'max':
    case 'xhigh':
      return 'high';
    default:
      return undefined;
  }
}

function reasoningEffort(req: MessagesRequest): ChatRequest['reasoning_effort'] {
  const t = req.thinking;
  const fromConfig = normalizeEffort(req.output_config?.effort);
  if (t?.type === 'disabled') return undefined;
  if (t?.type === 'enabled') return fromConfig ?? effortFromBudget(t.budget_tokens);
  if (t?.type === 'adaptive') return fromConfig ?? 'medium';
  return fromConfig;
}

/** The text of text parts, newline-joined (a system entry takes text only). */
function textOf(content: string | ChatContentPart[]): string {
  if (typeof content === 'string') return content;
  return content
    .filter((p): p is ChatTextPart => p.type === 'text')
    .map((p) => p.text)
    .join('\n');
}

/** A user turn: its tool results first (they answer the previous assistant turn), then its other content. */
function pushUserTurn(blocks: AnthropicContentBlock[], messages: ChatMessage[]): void {
  for (const b of blocks) {
    if (b && b.type === 'tool_result') {
      messages.push({ role: 'tool', tool_call_id: str(b.tool_use_id), content: toolResultContent(b) });
    }
  }
  const parts = userParts(blocks);
  if (parts.length) messages.push({ role: 'user', content: compact(parts) });
}

/** An assistant turn: its text and tool calls (a turn of only thinking blocks carries nothing a chat model uses). */
function pushAssistantTurn(blocks: AnthropicContentBlock[], messages: ChatMessage[], tools: ToolNameMap): void {
  const text = blocks
    .filter((b) => b && b.type === 'text')
    .map((b) => str((b as { text: unknown }).text))
    .join('');
  const calls: ChatToolCall[] = blocks
    .filter((b) => b && b.type === 'tool_use')
    .map((b) => {
      const u = b as { id: unknown; name: unknown; input: unknown };
      const name = tools.add({ name: str(u.name), kind: 'function' });
      return { id: str(u.id), type: 'function', function: { name, arguments: JSON.stringify(u.input ?? {}) } };
    });
  if (calls.length) messages.push({ role: 'assistant', content: text || null, tool_calls: calls });
  else if (text) messages.push({ role: 'assistant', content: text });
}

function pushTurn(m: MessagesRequest['messages'][number], messages: ChatMessage[], tools: ToolNameMap): void {
  if (m.role === 'system') {
    // Claude Code appends a system entry after the user turn for models it does not know: keep it in place.
    const content = typeof m.content === 'string' ? m.content : compact(userParts(m.content));
    messages.push({ role: 'system', content: textOf(content) });
  } else if (typeof m.content === 'string') {
    messages.push(m.role === 'user' ? { role: 'user', content: m.content } : { role: 'assistant', content: m.content });
  } else {
    const blocks = Array.isArray(m.content) ? m.content : [];
    if (m.role === 'user') pushUserTurn(blocks, messages);
    else pushAssistantTurn(blocks, messages, tools);
  }
}

/** Client tools as chat functions. Server tools (web search, code execution, ...) run at Anthropic: dropped. */
function chatToolsOf(list: MessagesRequest['tools'], tools: ToolNameMap): ChatFunctionTool[] {
  const out: ChatFunctionTool[] = [];
  for (const t of list ?? []) {
    if ((t.type && t.type !== 'custom') || typeof t.name !== 'string') continue;
    const fn = {
      name: tools.add({ name: t.name, kind: 'function' }),
      ...(t.description ? { description: t.description } : {}),
      parameters: t.input_schema ?? { type: 'object', properties: {} },
    };
    out.push({ type: 'function', function: fn });
  }
  return out;
}

function toolChoiceOf(tc: NonNullable<MessagesRequest['tool_choice']>, tools: ToolNameMap): ChatToolChoice | undefined {
  if (tc.type === 'auto') return 'auto';
  if (tc.type === 'any') return 'required';
  if (tc.type === 'none') return 'none';
  if (tc.type === 'tool')
    return { type: 'function', function: { name: tools.add({ name: tc.name, kind: 'function' }) } };
  return undefined;
}

/** The request's output, sampling and stream settings, carried onto `chat`. */
function applySettings(chat: ChatRequest, req: MessagesRequest, opts: TranslateOptions): void {
  applyLimits(chat, req.max_tokens, reasoningEffort(req), opts);
  if (req.stop_sequences?.length) chat.stop = req.stop_sequences;
  if (typeof req.temperature === 'number') chat.temperature = req.temperature;
  if (typeof req.top_p === 'number') chat.top_p = req.top_p;
  const user = req.metadata?.user_id;
  if (typeof user === 'string' && user.length > 0 && user.length <= 256) chat.user = user;
  if (req.stream) {
    chat.stream = true;
    chat.stream_options = { include_usage: true };
  }
}

export function messagesToChat(req: MessagesRequest, opts: TranslateOptions): ChatTranslation {
  const tools = new ToolNameMap();
  const messages: ChatMessage[] = [];
  const sys = systemText(req.system);
  if (sys) messages.push({ role: 'system', content: sys });
  for (const m of req.messages) pushTurn(m, messages, tools);

  const chat: ChatRequest = { model: opts.upstreamModel, messages };
  const chatTools = chatToolsOf(req.tools, tools);
  if (chatTools.length) {
    chat.tools = chatTools;
    const tc = req.tool_choice;
    const choice = tc ? toolChoiceOf(tc, tools) : undefined;
    if (choice) chat.tool_choice = choice;
    if (tc?.disable_parallel_tool_use === true) chat.parallel_tool_calls = false;
  }
  applySettings(chat, req, opts);
  return { chat, tools };
}
