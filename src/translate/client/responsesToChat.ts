import type {
  ChatContentPart,
  ChatFunctionTool,
  ChatMessage,
  ChatRequest,
  ChatTextPart,
  ChatToolChoice,
} from '../chatTypes';
import type { ResponsesContentPart, ResponsesItem, ResponsesRequest, ResponsesTool } from '../responsesTypes';
import { ToolNameMap } from '../toolNames';
import { applyLimits, normalizeEffort, type ChatTranslation, type TranslateOptions } from './messagesToChat';

/**
 * OpenAI Responses request -> Chat Completions request (reference 4.1). Chat upstreams only have function tools, so
 * `custom` (free-form) tools become functions with one string argument `input`, `namespace` groups and
 * `additional_tools` input items are flattened into functions (`<namespace>__<name>`), and hosted tools
 * (web_search, file_search, local_shell, mcp, ...) are dropped. The ToolNameMap maps calls back.
 */

/** The wrapper's parameter schema for a free-form tool. */
export const CUSTOM_TOOL_PARAMETERS = {
  type: 'object',
  properties: { input: { type: 'string', description: 'The raw input for the tool, exactly as the tool expects it.' } },
  required: ['input'],
  additionalProperties: false,
};

/** The whole input as items: a string is one user message. */
export function inputItems(input: ResponsesRequest['input']): ResponsesItem[] {
  if (typeof input === 'string') return [{ type: 'message', role: 'user', content: input }];
  return Array.isArray(input) ? input : [];
}

function imageUrl(p: ResponsesContentPart): string | null {
  if (typeof p.image_url === 'string') return p.image_url;
  if (p.image_url && typeof p.image_url === 'object' && typeof p.image_url.url === 'string') return p.image_url.url;
  return null;
}

const TEXT_PARTS = new Set(['input_text', 'output_text', 'text', 'summary_text']);

/** One content part as chat parts: none for a part a chat model cannot read. */
function partOf(p: ResponsesContentPart): ChatContentPart[] {
  if (TEXT_PARTS.has(p.type) && typeof p.text === 'string') return [{ type: 'text', text: p.text }];
  if (p.type === 'refusal' && typeof p.refusal === 'string') return [{ type: 'text', text: p.refusal }];
  if (p.type === 'input_image') {
    const url = imageUrl(p);
    const detail = p.detail && p.detail !== 'auto' ? { detail: p.detail } : {};
    return url ? [{ type: 'image_url', image_url: { url, ...detail } }] : [];
  }
  if (p.type === 'input_file') {
    const name = p.filename ? ` "${p.filename}"` : '';
    return [{ type: 'text', text: `[file${name} omitted: not supported by this model]` }];
  }
  return [];
}

function partsOf(content: ResponsesItem['content'] | ResponsesItem['output']): ChatContentPart[] {
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  const list = Array.isArray(content) ? content : [];
  return list.flatMap((p) => (p && typeof p === 'object' ? partOf(p) : []));
}

function textOf(parts: ChatContentPart[]): string {
  return parts
    .filter((p): p is ChatTextPart => p.type === 'text')
    .map((p) => p.text)
    .join('\n');
}

function compact(parts: ChatContentPart[]): string | ChatContentPart[] {
  return parts.every((p) => p.type === 'text') ? textOf(parts) : parts;
}

function customDescription(t: ResponsesTool): string {
  const base = t.description ?? '';
  const f = t.format;
  if (f?.type === 'grammar' && f.definition) {
    const rule = `It must follow this ${f.syntax ?? ''} grammar:\n${f.definition}`;
    return `${base}\n\nPass the tool's raw input as the string argument \`input\`. ${rule}`.trim();
  }
  return `${base}\n\nPass the tool's raw (free-form) input as the string argument \`input\`.`.trim();
}

/** A client function or free-form tool as a chat function named `name`. */
function functionOf(t: ResponsesTool, name: string): ChatFunctionTool['function'] {
  if (t.type === 'custom') return { name, description: customDescription(t), parameters: CUSTOM_TOOL_PARAMETERS };
  return {
    name,
    ...(t.description ? { description: t.description } : {}),
    parameters: t.parameters ?? { type: 'object', properties: {} },
    ...(typeof t.strict === 'boolean' ? { strict: t.strict } : {}),
  };
}

/** The chat tools being built, and the names given out so far. */
interface ToolSet {
  names: ToolNameMap;
  out: ChatFunctionTool[];
  seen: Set<string>;
}

/** Adds a client tool list, flattening namespaces; hosted tools (web_search, mcp, ...) a chat model cannot call. */
function addTools(list: ResponsesTool[] | undefined, set: ToolSet, namespace?: string): void {
  for (const t of Array.isArray(list) ? list : []) {
    if (!t || typeof t !== 'object' || typeof t.name !== 'string') continue;
    if (t.type === 'namespace' && Array.isArray(t.tools)) addTools(t.tools, set, t.name);
    if (t.type !== 'function' && t.type !== 'custom') continue;
    const name = set.names.add({ name: t.name, kind: t.type, ...(namespace ? { namespace } : {}) });
    if (set.seen.has(name)) continue;
    set.seen.add(name);
    set.out.push({ type: 'function', function: functionOf(t, name) });
  }
}

function toolChoice(tc: ResponsesRequest['tool_choice'], names: ToolNameMap): ChatToolChoice | undefined {
  if (tc === 'auto' || tc === 'none' || tc === 'required') return tc;
  if (tc && typeof tc === 'object' && (tc.type === 'function' || tc.type === 'custom') && typeof tc.name === 'string') {
    return {
      type: 'function',
      function: {
        name: names.add({ name: tc.name, kind: tc.type, ...(tc.namespace ? { namespace: tc.namespace } : {}) }),
      },
    };
  }
  if (tc && typeof tc === 'object' && tc.type === 'allowed_tools')
    return (tc as { mode?: string }).mode === 'required' ? 'required' : 'auto';
  return undefined;
}

type ItemTranslator = (it: ResponsesItem, messages: ChatMessage[], names: ToolNameMap) => void;

function messageItem(it: ResponsesItem, messages: ChatMessage[]): void {
  const parts = partsOf(it.content);
  if (it.role === 'system' || it.role === 'developer' || it.role === 'assistant') {
    const text = textOf(parts);
    if (text) messages.push({ role: it.role === 'assistant' ? 'assistant' : 'system', content: text });
  } else if (parts.length) {
    messages.push({ role: 'user', content: compact(parts) });
  }
}

function toolCallItem(it: ResponsesItem, messages: ChatMessage[], names: ToolNameMap): void {
  const kind = it.type === 'function_call' ? 'function' : 'custom';
  const name = names.add({ name: String(it.name ?? ''), kind, ...(it.namespace ? { namespace: it.namespace } : {}) });
  const args = kind === 'function' ? String(it.arguments ?? '') : JSON.stringify({ input: String(it.input ?? '') });
  const call = {
    id: String(it.call_id ?? it.id ?? ''),
    type: 'function' as const,
    function: { name, arguments: args },
  };
  // Calls of one turn form one assistant message (with the turn's text, if it came first).
  const prev = messages[messages.length - 1];
  if (prev?.role === 'assistant') prev.tool_calls = [...(prev.tool_calls ?? []), call];
  else messages.push({ role: 'assistant', content: null, tool_calls: [call] });
}

function toolOutputItem(it: ResponsesItem, messages: ChatMessage[]): void {
  messages.push({ role: 'tool', tool_call_id: String(it.call_id ?? ''), content: compact(partsOf(it.output ?? '')) });
}

/**
 * The item kinds a chat model can take. The others (reasoning, additional_tools, which adds tools before this,
 * item_reference, web_search_call, ...) are skipped.
 */
const ITEMS: Record<string, ItemTranslator> = {
  message: messageItem,
  function_call: toolCallItem,
  custom_tool_call: toolCallItem,
  function_call_output: toolOutputItem,
  custom_tool_call_output: toolOutputItem,
};

function responseFormat(f: NonNullable<ResponsesRequest['text']>['format']): ChatRequest['response_format'] {
  if (f?.type === 'json_object') return { type: 'json_object' };
  if (f?.type !== 'json_schema') return undefined;
  const schema = {
    name: f.name ?? 'response',
    schema: f.schema ?? {},
    ...(typeof f.strict === 'boolean' ? { strict: f.strict } : {}),
    ...(f.description ? { description: f.description } : {}),
  };
  return { type: 'json_schema', json_schema: schema };
}

/** The request's sampling, output and stream settings, carried onto `chat`. */
function applySettings(chat: ChatRequest, req: ResponsesRequest, opts: TranslateOptions): void {
  applyLimits(chat, req.max_output_tokens ?? undefined, normalizeEffort(req.reasoning?.effort), opts);
  if (typeof req.temperature === 'number') chat.temperature = req.temperature;
  if (typeof req.top_p === 'number') chat.top_p = req.top_p;
  const format = responseFormat(req.text?.format);
  if (format) chat.response_format = format;
  const user = req.safety_identifier ?? req.user;
  if (typeof user === 'string' && user && user.length <= 256) chat.user = user;
  if (req.stream) {
    chat.stream = true;
    chat.stream_options = { include_usage: true };
  }
}

export function responsesToChat(
  req: ResponsesRequest,
  opts: TranslateOptions & { history?: ResponsesItem[] },
): ChatTranslation {
  const tools: ToolSet = { names: new ToolNameMap(), out: [], seen: new Set() };
  const messages: ChatMessage[] = [];
  if (typeof req.instructions === 'string' && req.instructions) {
    messages.push({ role: 'system', content: req.instructions });
  }
  addTools(req.tools, tools);
  const items = [...(opts.history ?? []), ...inputItems(req.input)];
  // Declared tools (including additional_tools items) first, so history calls resolve to their tool kind.
  for (const it of items) if (it && it.type === 'additional_tools') addTools(it.tools, tools);
  for (const it of items) {
    if (!it || typeof it !== 'object') continue;
    const type = it.type ?? (it.role ? 'message' : undefined);
    if (type && Object.hasOwn(ITEMS, type)) ITEMS[type](it, messages, tools.names);
  }

  const chat: ChatRequest = { model: opts.upstreamModel, messages };
  if (tools.out.length) {
    chat.tools = tools.out;
    const tc = toolChoice(req.tool_choice, tools.names);
    if (tc) chat.tool_choice = tc;
    if (typeof req.parallel_tool_calls === 'boolean') chat.parallel_tool_calls = req.parallel_tool_calls;
  }
  applySettings(chat, req, opts);
  return { chat, tools: tools.names };
}
