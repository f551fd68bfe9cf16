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
import { clipJson } from '../../text';

/**
 * A client's /v1/chat/completions body -> the ChatRequest the bridges take (chatToAnthropic, chatToResponses here),
 * for chat models whose upstream does not speak Chat Completions. The bridges only know text and image parts, function
 * tools and one choice; anything else a client sends that they cannot honour is a 400 naming the field, never a
 * silently different answer.
 */

interface BodyLike {
  messages: { role: string; content?: unknown; tool_calls?: unknown; tool_call_id?: unknown }[];
  [k: string]: unknown;
}

const isObj = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** A part's cache_control (a prompt-cache breakpoint for a Claude upstream), kept as the client sent it. */
const cacheOf = (part: { cache_control?: unknown }) =>
  isObj(part.cache_control) ? { cache_control: part.cache_control } : {};

/**
 * A message's content as the bridges take it: a string when all parts are text (what every upstream accepts), else
 * the parts; parts carrying cache_control stay parts so the breakpoint reaches the upstream. `textOnly` roles
 * (system, assistant) refuse images.
 */
function parts(content: unknown, param: string, textOnly: boolean): string | ChatContentPart[] {
  if (content === undefined || content === null) return '';
  if (typeof content === 'string') return content;
  const out: ChatContentPart[] = [];
  (content as unknown[]).forEach((p, j) => {
    const part = p as {
      type?: unknown;
      text?: unknown;
      refusal?: unknown;
      image_url?: unknown;
      cache_control?: unknown;
    };
    if (part.type === 'text' && typeof part.text === 'string')
      out.push({ type: 'text', text: part.text, ...cacheOf(part) });
    // An assistant turn the model refused (a `refusal` part in the history) is what it said.
    else if (part.type === 'refusal' && typeof part.refusal === 'string')
      out.push({ type: 'text', text: part.refusal });
    else if (part.type === 'image_url' && !textOnly) {
      const iu = part.image_url;
      const url = typeof iu === 'string' ? iu : isObj(iu) && typeof iu.url === 'string' ? iu.url : null;
      if (!url) throw badRequest(`${param}[${j}].image_url.url must be a string.`, `${param}[${j}].image_url`);
      out.push({ type: 'image_url', image_url: { url }, ...cacheOf(part) });
    } else
      throw badRequest(
        `Content parts of type ${clipJson(part.type)} are not supported by this model` +
          `${textOnly ? ' in this message' : ''}.`,
        `${param}[${j}].type`,
        'unsupported_value',
      );
  });
  return out.every((p) => p.type === 'text' && p.cache_control === undefined)
    ? (out as ChatTextPart[]).map((p) => p.text).join('\n')
    : out;
}

/** Text of a content (an assistant turn: chat has no parts there that an upstream could cache separately). */
const plain = (c: string | ChatContentPart[]): string =>
  typeof c === 'string' ? c : c.map((p) => (p.type === 'text' ? p.text : '')).join('\n');

function toolCalls(v: unknown, param: string): ChatToolCall[] | undefined {
  if (!Array.isArray(v) || v.length === 0) return undefined;
  return v.map((tc, k) => {
    const c = tc as { id?: unknown; type?: unknown; function?: { name?: unknown; arguments?: unknown } };
    if (typeof c.id !== 'string' || typeof c.function?.name !== 'string')
      throw badRequest(`${param}[${k}] needs an id and function.name.`, `${param}[${k}]`);
    return {
      id: c.id,
      type: 'function',
      function: {
        name: c.function.name,
        arguments: typeof c.function.arguments === 'string' ? c.function.arguments : '',
      },
    };
  });
}

function tools(v: unknown): ChatFunctionTool[] | undefined {
  if (!Array.isArray(v) || v.length === 0) return undefined;
  return v.map((t, i) => {
    const f = t as { type?: unknown; function?: ChatFunctionTool['function'] };
    if (f.type !== 'function' || !isObj(f.function))
      throw badRequest(
        `Only function tools are supported by this model (tools[${i}].type is ${clipJson(f.type)}).`,
        `tools[${i}].type`,
        'unsupported_value',
      );
    return { type: 'function', function: f.function };
  });
}

function toolChoice(v: unknown): ChatToolChoice | undefined {
  if (v === undefined || v === null) return undefined;
  if (v === 'auto' || v === 'none' || v === 'required') return v;
  const name = isObj(v) && isObj(v.function) ? v.function.name : undefined;
  if (isObj(v) && v.type === 'function' && typeof name === 'string') return { type: 'function', function: { name } };
  throw badRequest(
    'tool_choice must be "auto", "none", "required" or {"type":"function","function":{"name":...}}.',
    'tool_choice',
  );
}

export function bridgeChatRequest(body: BodyLike, upstreamModel: string): ChatRequest {
  if (typeof body.n === 'number' && body.n > 1)
    throw badRequest('This model returns one choice per request: n must be 1.', 'n', 'unsupported_value');
  if (body.logprobs === true)
    throw badRequest('This model does not return log probabilities.', 'logprobs', 'unsupported_value');
  const messages: ChatMessage[] = body.messages.map((m, i): ChatMessage => {
    const param = `messages[${i}].content`;
    switch (m.role) {
      case 'system':
      case 'developer':
        return { role: 'system', content: parts(m.content, param, true) as string | ChatTextPart[] };
      case 'user':
        return { role: 'user', content: parts(m.content, param, false) };
      case 'assistant': {
        const c = plain(parts(m.content, param, true));
        const calls = toolCalls(m.tool_calls, `messages[${i}].tool_calls`);
        return calls ? { role: 'assistant', content: c || null, tool_calls: calls } : { role: 'assistant', content: c };
      }
      case 'tool':
        if (typeof m.tool_call_id !== 'string')
          throw badRequest(
            `messages[${i}].tool_call_id is required for a tool message.`,
            `messages[${i}].tool_call_id`,
            'missing_required_parameter',
          );
        return { role: 'tool', tool_call_id: m.tool_call_id, content: parts(m.content, param, false) };
      default:
        throw badRequest(
          `Messages of role ${clipJson(m.role)} are not supported by this model; use "tool".`,
          `messages[${i}].role`,
          'unsupported_value',
        );
    }
  });
  const chat: ChatRequest = { model: upstreamModel, messages };
  const t = tools(body.tools);
  if (t) chat.tools = t;
  const tc = toolChoice(body.tool_choice);
  if (tc) chat.tool_choice = tc;
  if (typeof body.parallel_tool_calls === 'boolean') chat.parallel_tool_calls = body.parallel_tool_calls;
  if (typeof body.max_completion_tokens === 'number') chat.max_completion_tokens = body.max_completion_tokens;
  if (typeof body.max_tokens === 'number') chat.max_tokens = body.max_tokens;
  if (typeof body.stop === 'string') chat.stop = [body.stop];
  else if (Array.isArray(body.stop) && body.stop.length) chat.stop = body.stop as string[];
  if (typeof body.temperature === 'number') chat.temperature = body.temperature;
  if (typeof body.top_p === 'number') chat.top_p = body.top_p;
  if (typeof body.user === 'string') chat.user = body.user;
  const effort = body.reasoning_effort;
  if (effort === 'minimal' || effort === 'low' || effort === 'medium' || effort === 'high')
    chat.reasoning_effort = effort;
  if (isObj(body.response_format) && body.response_format.type !== 'text') chat.response_format = body.response_format;
  if (body.stream === true) chat.stream = true;
  return chat;
}
