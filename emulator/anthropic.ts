import type Koa from 'koa';
import { recordServed } from './usageReports';
import { anthropicInputTokens } from './providerTokens';
import type Router from '@koa/router';
import type { Mount } from './mount';
import type { EmulatorControl } from './control';
import {
  DROP_MIDSTREAM_MARKER,
  hash,
  pieces,
  readJson,
  sampleFor,
  sse,
  tokens,
  usageMarkers,
  writeSse,
  type Json,
} from './replyKit';

/**
 * Emulated Anthropic Messages upstream under /anthropic: POST /v1/messages (JSON and SSE in Anthropic's exact
 * event order, paced by settings.chunkDelayMs) and POST /v1/messages/count_tokens. Deterministic: with client
 * tools it answers with a tool_use block (arguments valid against the tool's input_schema) unless the turn ends
 * with a tool_result; with thinking enabled or adaptive it starts with a signed thinking block. Token counts are
 * ceil(chars/4) over the request's text, the same for messages and count_tokens. A system prompt asking for a
 * "JSON object" is answered with one. A prompt containing EMULATOR_DROP_MIDSTREAM breaks a stream off halfway.
 */

function err(ctx: Koa.Context, status: number, type: string, message: string): void {
  ctx.status = status;
  ctx.body = { type: 'error', error: { type, message }, request_id: `req_emu${hash(message)}` };
}

function blockText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .map((b: Json) => {
      if (!b || typeof b !== 'object') return '';
      if (b.type === 'text') return String(b.text ?? '');
      if (b.type === 'tool_result') return blockText(b.content);
      if (b.type === 'tool_use') return JSON.stringify(b.input ?? {});
      if (b.type === 'thinking') return String(b.thinking ?? '');
      return '';
    })
    .join('');
}

/** Input tokens of a request: system, messages and tool definitions. */
export function countInputTokens(body: Json): number {
  let chars = blockText(body.system);
  for (const m of Array.isArray(body.messages) ? body.messages : []) chars += blockText(m?.content);
  if (Array.isArray(body.tools)) chars += JSON.stringify(body.tools);
  return tokens(chars.length);
}

function validate(ctx: Koa.Context, body: Json | null, countOnly: boolean): body is Json {
  if (!ctx.get('anthropic-version')) {
    err(ctx, 400, 'invalid_request_error', 'anthropic-version: header is required');
    return false;
  }
  if (!body) {
    err(ctx, 400, 'invalid_request_error', 'The request body is not valid JSON.');
    return false;
  }
  if (typeof body.model !== 'string') {
    err(ctx, 400, 'invalid_request_error', 'model: Field required');
    return false;
  }
  if (!countOnly && !(Number.isInteger(body.max_tokens) && body.max_tokens > 0)) {
    err(ctx, 400, 'invalid_request_error', 'max_tokens: Field required');
    return false;
  }
  if (!Array.isArray(body.messages) || body.messages.length === 0) {
    err(ctx, 400, 'invalid_request_error', 'messages: Field required');
    return false;
  }
  return true;
}

interface Reply {
  thinking: string | null;
  text: string;
  toolUse: { id: string; name: string; input: unknown } | null;
  stopReason: string;
  stopSequence: string | null;
  inputTokens: number;
  outputTokens: number;
}

function reply(body: Json): Reply {
  const messages: Json[] = body.messages;
  const lastUser = [...messages].reverse().find((m) => m?.role === 'user') ?? {};
  const blocks: Json[] = Array.isArray(lastUser.content) ? lastUser.content : [];
  const toolResult = blocks.find((b) => b?.type === 'tool_result');
  const said = toolResult ? blockText(toolResult.content) : blockText(lastUser.content);
  const thinkingOn = body.thinking?.type === 'enabled' || body.thinking?.type === 'adaptive';
  const thinking = thinkingOn ? `The user wrote ${said.length} characters; answer plainly.` : null;
  const tools: Json[] = Array.isArray(body.tools)
    ? body.tools.filter((t: Json) => t && typeof t.name === 'string' && (!t.type || t.type === 'custom'))
    : [];
  const choice = body.tool_choice;
  let toolUse: Reply['toolUse'] = null;
  let text: string;
  let stopReason = 'end_turn';
  let stopSequence: string | null = null;
  if (tools.length && choice?.type !== 'none' && !toolResult) {
    const tool = (choice?.type === 'tool' && tools.find((t) => t.name === choice.name)) || tools[0];
    const input = sampleFor(tool.input_schema ?? { type: 'object' }) ?? {};
    toolUse = { id: `toolu_emu${hash(tool.name + JSON.stringify(input) + said)}`, name: tool.name, input };
    text = `I will call ${tool.name}.`;
    stopReason = 'tool_use';
  } else {
    text = toolResult ? `The tool returned: ${said}` : `You said: ${said}`;
    // A system prompt asking for a JSON object gets one, as a model following the instruction would answer.
    if (/\bJSON object\b/.test(blockText(body.system))) text = JSON.stringify({ reply: text });
    for (const s of Array.isArray(body.stop_sequences) ? body.stop_sequences : []) {
      const i = typeof s === 'string' && s ? text.indexOf(s) : -1;
      if (i >= 0) {
        text = text.slice(0, i);
        stopReason = 'stop_sequence';
        stopSequence = s;
        break;
      }
    }
    if (tokens(text.length) > body.max_tokens) {
      text = text.slice(0, body.max_tokens * 4);
      stopReason = 'max_tokens';
      stopSequence = null;
    }
  }
  const outChars =
    (thinking?.length ?? 0) + text.length + (toolUse ? toolUse.name.length + JSON.stringify(toolUse.input).length : 0);
  return {
    thinking,
    text,
    toolUse,
    stopReason,
    stopSequence,
    inputTokens: countInputTokens(body),
    outputTokens: tokens(outChars),
  };
}

/** An emulated Messages answer to a valid request: the whole message, and the same answer as stream events. */
export function messageAnswer(body: Json, model: unknown, providerTokens = false): { message: Json; events: Json[] } {
  const r = reply(body);
  if (providerTokens) r.inputTokens = anthropicInputTokens(body);
  const id = `msg_emu${hash(JSON.stringify(body.messages).slice(0, 2000) + Date.now() + Math.random())}`;
  const signature = r.thinking ? `emu-sig-${hash(r.thinking)}` : '';
  // input_tokens excludes cache reads and writes (the prompt markers of replyKit ask for them).
  const mk = usageMarkers(blockText(body.system) + JSON.stringify(body.messages));
  const cache = {
    cache_creation_input_tokens: mk.cacheWrite5m + mk.cacheWrite1h,
    cache_read_input_tokens: mk.cacheRead,
    cache_creation: { ephemeral_5m_input_tokens: mk.cacheWrite5m, ephemeral_1h_input_tokens: mk.cacheWrite1h },
  };
  const usage = { input_tokens: r.inputTokens, output_tokens: r.outputTokens, ...cache };
  const content: Json[] = [];
  if (r.thinking) content.push({ type: 'thinking', thinking: r.thinking, signature });
  if (r.text) content.push({ type: 'text', text: r.text });
  if (r.toolUse) content.push({ type: 'tool_use', ...r.toolUse });
  const message = {
    id,
    type: 'message',
    role: 'assistant',
    model,
    content,
    stop_reason: r.stopReason,
    stop_sequence: r.stopSequence,
    usage,
  };
  const ev: Json[] = [];
  ev.push({
    type: 'message_start',
    message: { ...message, content: [], stop_reason: null, stop_sequence: null, usage: { ...usage, output_tokens: 1 } },
  });
  ev.push({ type: 'ping' });
  let index = 0;
  if (r.thinking) {
    ev.push({ type: 'content_block_start', index, content_block: { type: 'thinking', thinking: '', signature: '' } });
    for (const p of pieces(r.thinking))
      ev.push({ type: 'content_block_delta', index, delta: { type: 'thinking_delta', thinking: p } });
    ev.push({ type: 'content_block_delta', index, delta: { type: 'signature_delta', signature } });
    ev.push({ type: 'content_block_stop', index });
    index++;
  }
  if (r.text) {
    ev.push({ type: 'content_block_start', index, content_block: { type: 'text', text: '' } });
    for (const p of pieces(r.text))
      ev.push({ type: 'content_block_delta', index, delta: { type: 'text_delta', text: p } });
    ev.push({ type: 'content_block_stop', index });
    index++;
  }
  if (r.toolUse) {
    const json = JSON.stringify(r.toolUse.input);
    const half = Math.ceil(json.length / 2);
    ev.push({
      type: 'content_block_start',
      index,
      content_block: { type: 'tool_use', id: r.toolUse.id, name: r.toolUse.name, input: {} },
    });
    for (const part of ['', json.slice(0, half), json.slice(half)])
      ev.push({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: part } });
    ev.push({ type: 'content_block_stop', index });
  }
  ev.push({
    type: 'message_delta',
    delta: { stop_reason: r.stopReason, stop_sequence: r.stopSequence },
    usage: { input_tokens: r.inputTokens, output_tokens: r.outputTokens, ...cache },
  });
  ev.push({ type: 'message_stop' });
  return { message, events: ev };
}

/** Whether a Messages body (without its `model`, as cloud hosts take it) is one the emulator answers; else an error. */
export function invalidMessagesBody(body: Json | null): string | null {
  if (!body) return 'The request body is not valid JSON.';
  if (!(Number.isInteger(body.max_tokens) && body.max_tokens > 0)) return 'max_tokens: Field required';
  if (!Array.isArray(body.messages) || body.messages.length === 0) return 'messages: Field required';
  return null;
}

function messages(ctl: EmulatorControl) {
  return async (ctx: Koa.Context) => {
    const body = await readJson(ctx);
    ctl.record('POST', ctx.path, ctx.headers, body);
    if (!validate(ctx, body, false)) return;
    const { message, events } = messageAnswer(body, body.model, ctl.settings.providerTokens);
    const u = message.usage as Record<string, any>;
    recordServed(ctl, 'anthropic', String(body.model), {
      input: u.input_tokens,
      cacheRead: u.cache_read_input_tokens,
      cacheWrite5m: u.cache_creation.ephemeral_5m_input_tokens,
      cacheWrite1h: u.cache_creation.ephemeral_1h_input_tokens,
      output: u.output_tokens,
    });
    if (body.stream !== true) {
      ctx.set('request-id', `req_${message.id}`);
      ctx.body = message;
      return;
    }
    await writeSse(
      ctx,
      ctl,
      'anthropic',
      events.map((e) => sse(e.type, e)),
      { dropMidway: JSON.stringify(body.messages).includes(DROP_MIDSTREAM_MARKER) },
    );
  };
}

function countTokens(ctl: EmulatorControl) {
  return async (ctx: Koa.Context) => {
    const body = await readJson(ctx);
    ctl.record('POST', ctx.path, ctx.headers, body);
    if (!validate(ctx, body, true)) return;
    ctx.body = { input_tokens: countInputTokens(body) };
  };
}

export const mountAnthropic: Mount = (router: Router, ctl: EmulatorControl) => {
  router.post('/anthropic/v1/messages', messages(ctl));
  router.post('/anthropic/v1/messages/count_tokens', countTokens(ctl));
};
