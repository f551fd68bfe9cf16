import { badRequest } from '../../errors';
import type {
  ChatContentPart,
  ChatFunctionTool,
  ChatMessage,
  ChatRequest,
  ChatTextPart,
  ChatToolCall,
  ChatToolChoice,
} from '../chatTypes';
import type { GeminiContent, GeminiPart, GenerateContentRequest } from '../geminiTypes';
import {
  applyLimits,
  effortFromBudget,
  normalizeEffort,
  type ChatTranslation,
  type TranslateOptions,
} from './messagesToChat';
import { ToolNameMap } from '../toolNames';

/**
 * Gemini generateContent request -> Chat Completions request. Function calls without an id (older clients) get
 * one, and their responses are paired with them by name in order. Gemini-only tools (Google Search, code
 * execution, URL context) and safety settings have no chat counterpart and are dropped; so are thought parts of
 * earlier turns (a chat upstream cannot take them back).
 */

export interface GeminiTranslation extends ChatTranslation {
  /** includeThoughts: the upstream's reasoning goes back as thought parts. */
  includeThoughts: boolean;
}

const OPENAPI_INT_KEYS = new Set(['minItems', 'maxItems', 'minLength', 'maxLength', 'minProperties', 'maxProperties']);

/**
 * A Gemini `parameters` schema (OpenAPI 3 subset: upper-case types, `nullable`, 64-bit integers as strings) as
 * the JSON Schema a chat upstream takes. `parametersJsonSchema` is JSON Schema already and passes unchanged.
 */
export function jsonSchemaOf(s: unknown): unknown {
  if (Array.isArray(s)) return s.map(jsonSchemaOf);
  if (!s || typeof s !== 'object') return s;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(s as Record<string, unknown>)) {
    if (k === 'type' && typeof v === 'string') out.type = v.toLowerCase();
    else if (k === 'nullable' || k === 'propertyOrdering') continue;
    else if (OPENAPI_INT_KEYS.has(k) && typeof v === 'string' && /^\d+$/.test(v)) out[k] = Number(v);
    else if (k === 'properties' && v && typeof v === 'object')
      out.properties = Object.fromEntries(Object.entries(v).map(([p, ps]) => [p, jsonSchemaOf(ps)]));
    else if (k === 'enum' || k === 'required') out[k] = v;
    else out[k] = jsonSchemaOf(v);
  }
  if ((s as { nullable?: unknown }).nullable === true && typeof out.type === 'string') out.type = [out.type, 'null'];
  return out;
}

function partsOf(c: GeminiContent | string | undefined): GeminiPart[] {
  if (typeof c === 'string') return [{ text: c }];
  return Array.isArray(c?.parts) ? c.parts.filter((p) => p && typeof p === 'object') : [];
}

/** A text, image or file part as chat content (null: nothing a chat model can read). */
function userPart(p: GeminiPart): ChatContentPart | null {
  if (typeof p.text === 'string' && p.thought !== true) return { type: 'text', text: p.text };
  const d = p.inlineData;
  if (d && typeof d.data === 'string') {
    const mime = d.mimeType ?? 'application/octet-stream';
    if (mime.startsWith('image/')) return { type: 'image_url', image_url: { url: `data:${mime};base64,${d.data}` } };
    return { type: 'text', text: `[inline ${mime} data omitted: not supported by this model]` };
  }
  const f = p.fileData;
  if (f && typeof f.fileUri === 'string') {
    if ((f.mimeType ?? '').startsWith('image/') && /^https?:\/\//.test(f.fileUri))
      return { type: 'image_url', image_url: { url: f.fileUri } };
    return { type: 'text', text: `[file ${f.fileUri} omitted: not supported by this model]` };
  }
  return null;
}

function compact(parts: ChatContentPart[]): string | ChatContentPart[] {
  if (parts.every((p) => p.type === 'text')) return (parts as ChatTextPart[]).map((p) => p.text).join('\n');
  return parts;
}

function responseText(r: unknown): string {
  if (typeof r === 'string') return r;
  // The Gemini convention is {output: ...} or {error: ...}; a lone string output reads as itself.
  const o = r as { output?: unknown; error?: unknown } | null;
  if (o && typeof o === 'object' && Object.keys(o).length === 1 && typeof o.output === 'string') return o.output;
  return JSON.stringify(r ?? {});
}

function effortOf(
  cfg: NonNullable<GenerateContentRequest['generationConfig']>['thinkingConfig'],
): ChatRequest['reasoning_effort'] {
  if (!cfg) return undefined;
  const level = normalizeEffort(typeof cfg.thinkingLevel === 'string' ? cfg.thinkingLevel.toLowerCase() : undefined);
  if (level) return level;
  const budget = cfg.thinkingBudget;
  if (typeof budget !== 'number' || budget < 0) return budget === -1 ? 'medium' : undefined; // -1: dynamic
  return budget === 0 ? undefined : effortFromBudget(budget);
}

export function geminiToChat(
  req: GenerateContentRequest,
  opts: TranslateOptions & { stream: boolean },
): GeminiTranslation {
  const tools = new ToolNameMap();
  const messages: ChatMessage[] = [];
  const sys = partsOf(req.systemInstruction)
    .map((p) => (typeof p.text === 'string' ? p.text : ''))
    .filter(Boolean)
    .join('\n');
  if (sys) messages.push({ role: 'system', content: sys });
  // Calls without an id, per name, waiting for their response (Gemini pairs them by name and order).
  const pending = new Map<string, string[]>();
  let seq = 0;
  for (const c of req.contents) {
    const parts = partsOf(c);
    if (c.role === 'model') {
      const text = parts
        .filter((p) => typeof p.text === 'string' && p.thought !== true)
        .map((p) => p.text)
        .join('');
      const calls: ChatToolCall[] = [];
      for (const p of parts) {
        const fc = p.functionCall;
        if (!fc || typeof fc.name !== 'string') continue;
        const id = typeof fc.id === 'string' && fc.id ? fc.id : `call_g${seq++}`;
        if (!fc.id) pending.set(fc.name, [...(pending.get(fc.name) ?? []), id]);
        calls.push({
          id,
          type: 'function',
          function: { name: tools.add({ name: fc.name, kind: 'function' }), arguments: JSON.stringify(fc.args ?? {}) },
        });
      }
      if (calls.length) messages.push({ role: 'assistant', content: text || null, tool_calls: calls });
      else if (text) messages.push({ role: 'assistant', content: text });
      continue;
    }
    // user (or the older `function` role): function responses answer the previous model turn, so they go first.
    for (const p of parts) {
      const fr = p.functionResponse;
      if (!fr || typeof fr.name !== 'string') continue;
      const id = typeof fr.id === 'string' && fr.id ? fr.id : (pending.get(fr.name)?.shift() ?? `call_g${seq++}`);
      messages.push({ role: 'tool', tool_call_id: id, content: responseText(fr.response) });
    }
    const content = parts.map(userPart).filter((p): p is ChatContentPart => p !== null);
    if (content.length) messages.push({ role: 'user', content: compact(content) });
  }

  const chat: ChatRequest = { model: opts.upstreamModel, messages };
  const chatTools: ChatFunctionTool[] = [];
  for (const t of req.tools ?? []) {
    for (const f of t?.functionDeclarations ?? []) {
      if (!f || typeof f.name !== 'string') continue;
      const parameters =
        f.parametersJsonSchema ?? (f.parameters ? jsonSchemaOf(f.parameters) : { type: 'object', properties: {} });
      chatTools.push({
        type: 'function',
        function: {
          name: tools.add({ name: f.name, kind: 'function' }),
          ...(f.description ? { description: f.description } : {}),
          parameters,
        },
      });
    }
  }
  if (chatTools.length) {
    chat.tools = chatTools;
    const fc = req.toolConfig?.functionCallingConfig;
    const allowed = fc?.allowedFunctionNames ?? [];
    let choice: ChatToolChoice | undefined;
    switch (fc?.mode) {
      case 'NONE':
        choice = 'none';
        break;
      case 'ANY':
        choice =
          allowed.length === 1
            ? { type: 'function', function: { name: tools.add({ name: allowed[0], kind: 'function' }) } }
            : 'required';
        break;
      case 'AUTO':
      case 'VALIDATED':
        choice = 'auto';
        break;
    }
    if (choice) chat.tool_choice = choice;
  }

  const g = req.generationConfig ?? {};
  if (typeof g.candidateCount === 'number' && g.candidateCount > 1)
    throw badRequest(
      'generationConfig.candidateCount above 1 is not supported by this model.',
      'generationConfig.candidateCount',
      'unsupported_parameter',
    );
  applyLimits(chat, g.maxOutputTokens, effortOf(g.thinkingConfig), opts);
  if (g.stopSequences?.length) chat.stop = g.stopSequences;
  if (typeof g.temperature === 'number') chat.temperature = g.temperature;
  if (typeof g.topP === 'number') chat.top_p = g.topP;
  const schema = g.responseJsonSchema ?? (g.responseSchema ? jsonSchemaOf(g.responseSchema) : undefined);
  if (g.responseMimeType === 'application/json') {
    chat.response_format = schema
      ? { type: 'json_schema', json_schema: { name: 'response', schema } }
      : { type: 'json_object' };
  }
  if (opts.stream) {
    chat.stream = true;
    chat.stream_options = { include_usage: true };
  }
  return { chat, tools, includeThoughts: g.thinkingConfig?.includeThoughts === true };
}
