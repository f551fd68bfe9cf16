import type { ChatContentPart, ChatFunctionTool, ChatMessage, ChatRequest, ChatTextPart, ChatToolChoice } from './chatTypes';
import type { ResponsesContentPart, ResponsesItem, ResponsesRequest, ResponsesTool } from './responsesTypes';
import { ToolNameMap } from './toolNames';
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

function partsOf(content: ResponsesItem['content'] | ResponsesItem['output']): ChatContentPart[] {
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  const parts: ChatContentPart[] = [];
  for (const p of Array.isArray(content) ? content : []) {
    if (!p || typeof p !== 'object') continue;
    if ((p.type === 'input_text' || p.type === 'output_text' || p.type === 'text' || p.type === 'summary_text') && typeof p.text === 'string') parts.push({ type: 'text', text: p.text });
    else if (p.type === 'refusal' && typeof p.refusal === 'string') parts.push({ type: 'text', text: p.refusal });
    else if (p.type === 'input_image') {
      const url = imageUrl(p);
      if (url) parts.push({ type: 'image_url', image_url: { url, ...(p.detail && p.detail !== 'auto' ? { detail: p.detail } : {}) } });
    } else if (p.type === 'input_file') parts.push({ type: 'text', text: `[file${p.filename ? ` "${p.filename}"` : ''} omitted: not supported by this model]` });
  }
  return parts;
}

function textOf(parts: ChatContentPart[]): string {
  return parts.filter((p): p is ChatTextPart => p.type === 'text').map((p) => p.text).join('\n');
}

function compact(parts: ChatContentPart[]): string | ChatContentPart[] {
  return parts.every((p) => p.type === 'text') ? textOf(parts) : parts;
}

function customDescription(t: ResponsesTool): string {
  const base = t.description ?? '';
  const f = t.format;
  if (f?.type === 'grammar' && f.definition) {
    return `${base}\n\nPass the tool's raw input as the string argument \`input\`. It must follow this ${f.syntax ?? ''} grammar:\n${f.definition}`.trim();
  }
  return `${base}\n\nPass the tool's raw (free-form) input as the string argument \`input\`.`.trim();
}

/** Adds a client tool list to `out`, flattening namespaces; hosted tools are skipped. */
function addTools(list: ResponsesTool[] | undefined, names: ToolNameMap, out: ChatFunctionTool[], seen: Set<string>, namespace?: string): void {
  for (const t of Array.isArray(list) ? list : []) {
    if (!t || typeof t !== 'object') continue;
    if (t.type === 'namespace' && Array.isArray(t.tools) && typeof t.name === 'string') {
      addTools(t.tools, names, out, seen, t.name);
      continue;
    }
    if ((t.type === 'function' || t.type === 'custom') && typeof t.name === 'string') {
      const name = names.add({ name: t.name, kind: t.type, ...(namespace ? { namespace } : {}) });
      if (seen.has(name)) continue;
      seen.add(name);
      const fn: ChatFunctionTool['function'] = t.type === 'function'
        ? { name, ...(t.description ? { description: t.description } : {}), parameters: t.parameters ?? { type: 'object', properties: {} }, ...(typeof t.strict === 'boolean' ? { strict: t.strict } : {}) }
        : { name, description: customDescription(t), parameters: CUSTOM_TOOL_PARAMETERS };
      out.push({ type: 'function', function: fn });
    }
    // web_search, file_search, local_shell, mcp, image_generation, ...: hosted tools a chat model cannot call.
  }
}

function toolChoice(tc: ResponsesRequest['tool_choice'], names: ToolNameMap): ChatToolChoice | undefined {
  if (tc === 'auto' || tc === 'none' || tc === 'required') return tc;
  if (tc && typeof tc === 'object' && (tc.type === 'function' || tc.type === 'custom') && typeof tc.name === 'string') {
    return { type: 'function', function: { name: names.add({ name: tc.name, kind: tc.type, ...(tc.namespace ? { namespace: tc.namespace } : {}) }) } };
  }
  if (tc && typeof tc === 'object' && tc.type === 'allowed_tools') return (tc as { mode?: string }).mode === 'required' ? 'required' : 'auto';
  return undefined;
}

export function responsesToChat(req: ResponsesRequest, opts: TranslateOptions & { history?: ResponsesItem[] }): ChatTranslation {
  const names = new ToolNameMap();
  const messages: ChatMessage[] = [];
  const tools: ChatFunctionTool[] = [];
  const seen = new Set<string>();
  if (typeof req.instructions === 'string' && req.instructions) messages.push({ role: 'system', content: req.instructions });
  addTools(req.tools, names, tools, seen);

  const items = [...(opts.history ?? []), ...inputItems(req.input)];
  // Declared tools (including additional_tools items) first, so history calls resolve to their tool kind.
  for (const it of items) if (it && it.type === 'additional_tools') addTools(it.tools, names, tools, seen);

  const lastAssistant = () => {
    const m = messages[messages.length - 1];
    return m && m.role === 'assistant' ? m : null;
  };
  for (const it of items) {
    if (!it || typeof it !== 'object') continue;
    const type = it.type ?? (it.role ? 'message' : undefined);
    switch (type) {
      case 'message': {
        const parts = partsOf(it.content);
        if (it.role === 'system' || it.role === 'developer') {
          const text = textOf(parts);
          if (text) messages.push({ role: 'system', content: text });
        } else if (it.role === 'assistant') {
          const text = textOf(parts);
          if (text) messages.push({ role: 'assistant', content: text });
        } else if (parts.length) {
          messages.push({ role: 'user', content: compact(parts) });
        }
        break;
      }
      case 'function_call':
      case 'custom_tool_call': {
        const kind = type === 'function_call' ? 'function' : 'custom';
        const name = names.add({ name: String(it.name ?? ''), kind, ...(it.namespace ? { namespace: it.namespace } : {}) });
        const args = kind === 'function' ? String(it.arguments ?? '') : JSON.stringify({ input: String(it.input ?? '') });
        const call = { id: String(it.call_id ?? it.id ?? ''), type: 'function' as const, function: { name, arguments: args } };
        // Calls of one turn form one assistant message (with the turn's text, if it came first).
        const prev = lastAssistant();
        if (prev) prev.tool_calls = [...(prev.tool_calls ?? []), call];
        else messages.push({ role: 'assistant', content: null, tool_calls: [call] });
        break;
      }
      case 'function_call_output':
      case 'custom_tool_call_output': {
        const parts = partsOf(it.output ?? '');
        messages.push({ role: 'tool', tool_call_id: String(it.call_id ?? ''), content: compact(parts) });
        break;
      }
      default:
        // reasoning (encrypted or not), additional_tools (handled above), item_reference, web_search_call, ...:
        // nothing a chat model can take.
        break;
    }
  }

  const chat: ChatRequest = { model: opts.upstreamModel, messages };
  if (tools.length) {
    chat.tools = tools;
    const tc = toolChoice(req.tool_choice, names);
    if (tc) chat.tool_choice = tc;
    if (typeof req.parallel_tool_calls === 'boolean') chat.parallel_tool_calls = req.parallel_tool_calls;
  }
  applyLimits(chat, req.max_output_tokens ?? undefined, normalizeEffort(req.reasoning?.effort), opts);
  if (typeof req.temperature === 'number') chat.temperature = req.temperature;
  if (typeof req.top_p === 'number') chat.top_p = req.top_p;
  const f = req.text?.format;
  if (f?.type === 'json_schema') {
    chat.response_format = { type: 'json_schema', json_schema: { name: f.name ?? 'response', schema: f.schema ?? {}, ...(typeof f.strict === 'boolean' ? { strict: f.strict } : {}), ...(f.description ? { description: f.description } : {}) } };
  } else if (f?.type === 'json_object') chat.response_format = { type: 'json_object' };
  const user = req.safety_identifier ?? req.user;
  if (typeof user === 'string' && user && user.length <= 256) chat.user = user;
  if (req.stream) {
    chat.stream = true;
    chat.stream_options = { include_usage: true };
  }
  return { chat, tools: names };
}
