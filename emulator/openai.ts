import { recordServed } from './usageReports';
import { Readable } from 'node:stream';
import { openaiPromptTokens } from './providerTokens';
import type Koa from 'koa';
import type Router from '@koa/router';
import type { Mount } from './mount';
import type { EmulatorControl } from './control';
import { NO_MARKERS, openSse, pieces, usageMarkers, type UsageMarkers } from './replyKit';
import {
  AUDIO_CONTENT_TYPES,
  AUDIO_FORMATS,
  audioDurationSeconds,
  audioFixture,
  isPng,
  seededPng,
  type AudioFormat,
} from './media';

/**
 * Emulated OpenAI-compatible upstream under /openai/v1: chat completions and legacy completions (JSON and SSE,
 * include_usage, tools -> a deterministic tool call, stop, max_tokens -> finish_reason "length", JSON mode),
 * embeddings (deterministic unit vectors from a hash of the text; float or base64 little-endian float32),
 * speech (real audio bytes), transcriptions (json/text/srt/vtt/verbose_json) and image generation/edits (real
 * PNGs, b64_json or url). Token counts are ceil(chars/4), deterministic. Kept cheap per request: it is the
 * upstream in the benchmark.
 */

/** Per-emulator counters tests read to prove that a client abort reached the upstream. */
export interface OpenAIEmulatorStats {
  streamsStarted: number;
  streamsCompleted: number;
  streamsAborted: number;
}
const statsByCtl = new WeakMap<EmulatorControl, OpenAIEmulatorStats>();
export function openaiEmulatorStats(ctl: EmulatorControl): OpenAIEmulatorStats {
  let s = statsByCtl.get(ctl);
  if (!s) {
    s = { streamsStarted: 0, streamsCompleted: 0, streamsAborted: 0 };
    statsByCtl.set(ctl, s);
  }
  return s;
}

type Json = Record<string, any>;
const tokens = (chars: number) => Math.ceil(chars / 4);

function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

function fail(
  ctx: Koa.Context,
  status: number,
  message: string,
  param: string | null = null,
  code: string | null = null,
): void {
  ctx.status = status;
  ctx.body = { error: { message, type: 'invalid_request_error', param, code } };
}

async function readJson(ctx: Koa.Context): Promise<Json | null> {
  const chunks: Buffer[] = [];
  for await (const c of ctx.req) chunks.push(c as Buffer);
  try {
    const v = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    return v && typeof v === 'object' && !Array.isArray(v) ? v : null;
  } catch {
    return null;
  }
}

export async function readForm(ctx: Koa.Context): Promise<FormData | null> {
  try {
    return await new Response(Readable.toWeb(ctx.req) as ReadableStream, {
      headers: { 'content-type': ctx.get('content-type') },
    }).formData();
  } catch {
    return null;
  }
}

/** Text of a message's content: a string, or the text parts of a content array. */
function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((p) => (p && typeof p.text === 'string' ? p.text : '')).join('');
  return '';
}

/** An example value for a JSON schema, so tool-call arguments are valid against the tool's parameters. */
function sampleFor(schema: any, depth = 0): unknown {
  if (!schema || typeof schema !== 'object' || depth > 4) return null;
  if (Array.isArray(schema.enum) && schema.enum.length) return schema.enum[0];
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  switch (type) {
    case 'string':
      return 'example';
    case 'integer':
    case 'number':
      return 1;
    case 'boolean':
      return true;
    case 'array':
      return [sampleFor(schema.items, depth + 1)];
    case 'object':
    default: {
      const out: Json = {};
      const props = schema.properties ?? {};
      for (const k of Object.keys(props)) out[k] = sampleFor(props[k], depth + 1);
      return out;
    }
  }
}

interface ChatReply {
  content: string | null;
  toolCall: { id: string; name: string; arguments: string } | null;
  finish: string;
  promptTokens: number;
  completionTokens: number;
  markers: UsageMarkers;
}

function applyLimits(text: string, body: Json): { text: string; finish: string } {
  let out = text;
  let finish = 'stop';
  const stops: string[] =
    typeof body.stop === 'string'
      ? [body.stop]
      : Array.isArray(body.stop)
        ? body.stop.filter((s: unknown) => typeof s === 'string' && s)
        : [];
  for (const s of stops) {
    const i = out.indexOf(s);
    if (i >= 0) out = out.slice(0, i);
  }
  const max = body.max_completion_tokens ?? body.max_tokens;
  if (Number.isInteger(max) && max > 0 && tokens(out.length) > max) {
    out = out.slice(0, max * 4);
    finish = 'length';
  }
  return { text: out, finish };
}

function chatReply(body: Json): ChatReply {
  const messages: Json[] = body.messages;
  let promptChars = 0;
  let markerText = '';
  for (const m of messages) {
    const t = contentText(m?.content);
    promptChars += t.length;
    if (t.includes('[')) markerText += t;
  }
  const promptTokens = tokens(promptChars);
  const markers = markerText ? usageMarkers(markerText) : NO_MARKERS;
  const last = messages[messages.length - 1] ?? {};
  const tools: Json[] = Array.isArray(body.tools)
    ? body.tools.filter((t: Json) => t?.type === 'function' && t.function?.name)
    : [];
  if (tools.length && body.tool_choice !== 'none' && last.role !== 'tool') {
    const wanted = typeof body.tool_choice === 'object' ? body.tool_choice?.function?.name : undefined;
    const tool = tools.find((t) => t.function.name === wanted) ?? tools[0];
    const args = JSON.stringify(sampleFor(tool.function.parameters ?? { type: 'object' }));
    const id = `call_${fnv1a(tool.function.name + args + promptChars)
      .toString(16)
      .padStart(8, '0')}`;
    return {
      content: null,
      toolCall: { id, name: tool.function.name, arguments: args },
      finish: 'tool_calls',
      promptTokens,
      completionTokens: tokens(tool.function.name.length + args.length),
      markers,
    };
  }
  const said = contentText(last.content);
  let text = last.role === 'tool' ? `The tool returned: ${said}` : `You said: ${said}`;
  const fmt = body.response_format?.type;
  if (fmt === 'json_object' || fmt === 'json_schema') text = JSON.stringify({ reply: text });
  const limited = applyLimits(text, body);
  return {
    content: limited.text,
    toolCall: null,
    finish: limited.finish,
    promptTokens,
    completionTokens: tokens(limited.text.length),
    markers,
  };
}

/** The prompt's tokens the deployment serving it (`/_d/<name>/`) had in its prefix cache (./prefixCache.ts). */
function prefixCached(ctl: EmulatorControl, ctx: Koa.Context, body: Json, promptTokens: number): number {
  const deployment = String(ctx.req.headers['x-emulator-deployment'] ?? '');
  const text = (body.messages as Json[]).map((m) => `${m?.role}:${contentText(m?.content)}`).join('\n');
  return Math.min(promptTokens, ctl.prefixes.read(deployment, text));
}

/** OpenAI counts cached tokens inside prompt_tokens and reasoning tokens inside completion_tokens. */
function usageOf(prompt: number, completion: number, m: UsageMarkers = NO_MARKERS): Json {
  const p = prompt + m.cacheRead;
  const c = completion + m.reasoning;
  return {
    prompt_tokens: p,
    completion_tokens: c,
    total_tokens: p + c,
    prompt_tokens_details: { cached_tokens: m.cacheRead },
    completion_tokens_details: { reasoning_tokens: m.reasoning },
  };
}

let seq = 0;
const nowSec = () => Math.floor(Date.now() / 1000);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Writes SSE events, paced by chunkDelayMs; stops (and counts an abort) if the client goes away. */
async function streamEvents(
  ctx: Koa.Context,
  ctl: EmulatorControl,
  events: string[],
  cutAfter?: number,
): Promise<void> {
  const stats = openaiEmulatorStats(ctl);
  stats.streamsStarted++;
  const { res, closed } = openSse(ctx, () => stats.streamsAborted++);
  const delay = ctl.settings.chunkDelayMs;
  const errorAfter: unknown = ctx.state.emulatorErrorAfter;
  if (typeof errorAfter === 'number') {
    // An `errorAfter` fault: N events, then an error event and [DONE] on a cleanly ended response (vLLM's shape).
    const error = {
      object: 'error',
      message: 'emulated generation failure',
      type: 'InternalServerError',
      param: null,
      code: 500,
    };
    res.end(events.slice(0, errorAfter).join('') + data({ error }) + 'data: [DONE]\n\n');
    return;
  }
  if (cutAfter !== undefined) {
    // Test hook: the upstream dies mid-stream (connection destroyed after N events, no [DONE]).
    res.flushHeaders();
    for (const e of events.slice(0, cutAfter)) {
      res.write(e);
      if (delay > 0) await sleep(delay);
    }
    await sleep(10);
    res.destroy();
    return;
  }
  if (delay <= 0) {
    res.end(events.join('') + 'data: [DONE]\n\n');
    stats.streamsCompleted++;
    return;
  }
  res.flushHeaders();
  for (const e of events) {
    if (closed()) return;
    res.write(e);
    await sleep(delay);
  }
  if (closed()) return;
  res.end('data: [DONE]\n\n');
  stats.streamsCompleted++;
}

/** Test hook: a request field `emulator_cut_after` (events) makes the stream break mid-way. */
/** Where a stream is cut: the request's test hook, else a `cutAfter` fault on this request (ctx.state). */
const cutAfter = (body: Json, ctx?: Koa.Context): number | undefined =>
  Number.isInteger(body.emulator_cut_after) ? body.emulator_cut_after : ctx?.state.emulatorCutAfter;

const data = (o: unknown) => `data: ${JSON.stringify(o)}\n\n`;

function chatCompletions(ctl: EmulatorControl) {
  return async (ctx: Koa.Context) => {
    const body = await readJson(ctx);
    ctl.record('POST', ctx.path, ctx.headers, body);
    if (!body) return fail(ctx, 400, 'We could not parse the JSON body of your request.', null, 'invalid_json');
    if (typeof body.model !== 'string')
      return fail(ctx, 400, 'you must provide a model parameter', 'model', 'missing_required_parameter');
    if (!Array.isArray(body.messages) || body.messages.length === 0)
      return fail(ctx, 400, "Missing required parameter: 'messages'.", 'messages', 'missing_required_parameter');
    const r = chatReply(body);
    if (ctl.settings.providerTokens) r.promptTokens = openaiPromptTokens(body);
    const n = Number.isInteger(body.n) && body.n > 0 ? Math.min(body.n, 16) : 1;
    const id = `chatcmpl-emu${++seq}`;
    const created = nowSec();
    const model = body.model;
    const usage = usageOf(r.promptTokens, r.completionTokens * n, r.markers);
    // The deployment's prefix cache: its cached tokens are part of the prompt's, read at the cached price.
    const cached = ctl.settings.prefixCache ? prefixCached(ctl, ctx, body, r.promptTokens) : 0;
    usage.prompt_tokens_details.cached_tokens += cached;
    recordServed(ctl, 'openai', String(model), {
      input: r.promptTokens - cached,
      cacheRead: r.markers.cacheRead + cached,
      cacheWrite5m: 0,
      cacheWrite1h: 0,
      output: r.completionTokens * n + r.markers.reasoning,
    });
    if (body.stream !== true) {
      const message: Json = { role: 'assistant', content: r.content, refusal: null };
      if (r.toolCall)
        message.tool_calls = [
          { id: r.toolCall.id, type: 'function', function: { name: r.toolCall.name, arguments: r.toolCall.arguments } },
        ];
      ctx.body = {
        id,
        object: 'chat.completion',
        created,
        model,
        system_fingerprint: 'fp_emulator',
        choices: Array.from({ length: n }, (_, index) => ({ index, message, logprobs: null, finish_reason: r.finish })),
        usage,
      };
      return;
    }
    const withUsage = body.stream_options?.include_usage === true;
    const chunk = (index: number, delta: Json, finish: string | null) => {
      const c: Json = {
        id,
        object: 'chat.completion.chunk',
        created,
        model,
        system_fingerprint: 'fp_emulator',
        choices: [{ index, delta, logprobs: null, finish_reason: finish }],
      };
      if (withUsage) c.usage = null;
      return data(c);
    };
    const events: string[] = [];
    for (let i = 0; i < n; i++) {
      events.push(chunk(i, { role: 'assistant', content: r.toolCall ? null : '', refusal: null }, null));
      if (r.toolCall) {
        const a = r.toolCall.arguments;
        const half = Math.ceil(a.length / 2);
        events.push(
          chunk(
            i,
            {
              tool_calls: [
                { index: 0, id: r.toolCall.id, type: 'function', function: { name: r.toolCall.name, arguments: '' } },
              ],
            },
            null,
          ),
        );
        events.push(chunk(i, { tool_calls: [{ index: 0, function: { arguments: a.slice(0, half) } }] }, null));
        events.push(chunk(i, { tool_calls: [{ index: 0, function: { arguments: a.slice(half) } }] }, null));
      } else {
        for (const p of pieces(r.content ?? '')) events.push(chunk(i, { content: p }, null));
      }
      events.push(chunk(i, {}, r.finish));
    }
    if (withUsage)
      events.push(
        data({
          id,
          object: 'chat.completion.chunk',
          created,
          model,
          system_fingerprint: 'fp_emulator',
          choices: [],
          usage,
        }),
      );
    await streamEvents(ctx, ctl, events, cutAfter(body, ctx));
  };
}

function completions(ctl: EmulatorControl) {
  return async (ctx: Koa.Context) => {
    const body = await readJson(ctx);
    ctl.record('POST', ctx.path, ctx.headers, body);
    if (!body) return fail(ctx, 400, 'We could not parse the JSON body of your request.', null, 'invalid_json');
    const prompts: string[] =
      typeof body.prompt === 'string'
        ? [body.prompt]
        : Array.isArray(body.prompt)
          ? body.prompt.map((p: unknown) => (typeof p === 'string' ? p : JSON.stringify(p)))
          : [];
    if (typeof body.model !== 'string' || prompts.length === 0)
      return fail(ctx, 400, "Missing required parameter: 'prompt'.", 'prompt', 'missing_required_parameter');
    const id = `cmpl-emu${++seq}`;
    const created = nowSec();
    const model = body.model;
    let promptTokens = 0;
    let completionTokens = 0;
    const choices = prompts.map((prompt, index) => {
      promptTokens += tokens(prompt.length);
      const lim = applyLimits(` and then the story continues: ${prompt}`, body);
      completionTokens += tokens(lim.text.length);
      return { text: (body.echo === true ? prompt : '') + lim.text, index, logprobs: null, finish_reason: lim.finish };
    });
    const usage = {
      prompt_tokens: promptTokens,
      completion_tokens: completionTokens,
      total_tokens: promptTokens + completionTokens,
    };
    recordServed(ctl, 'openai', String(model), { input: promptTokens, output: completionTokens });
    if (body.stream !== true) {
      ctx.body = { id, object: 'text_completion', created, model, system_fingerprint: 'fp_emulator', choices, usage };
      return;
    }
    const withUsage = body.stream_options?.include_usage === true;
    const events: string[] = [];
    for (const c of choices) {
      for (const p of pieces(c.text))
        events.push(
          data({
            id,
            object: 'text_completion',
            created,
            model,
            choices: [{ text: p, index: c.index, logprobs: null, finish_reason: null }],
          }),
        );
      events.push(
        data({
          id,
          object: 'text_completion',
          created,
          model,
          choices: [{ text: '', index: c.index, logprobs: null, finish_reason: c.finish_reason }],
        }),
      );
    }
    if (withUsage) events.push(data({ id, object: 'text_completion', created, model, choices: [], usage }));
    await streamEvents(ctx, ctl, events, cutAfter(body, ctx));
  };
}

/** A deterministic unit vector for a text (xorshift32 seeded by FNV-1a), as float32. */
export function embed(text: string, dims: number): Float32Array {
  const v = new Float32Array(dims);
  let x = fnv1a(text) || 1;
  let norm = 0;
  for (let i = 0; i < dims; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    const f = ((x >>> 0) / 0xffffffff) * 2 - 1;
    v[i] = f;
    norm += f * f;
  }
  const k = 1 / Math.sqrt(norm || 1);
  for (let i = 0; i < dims; i++) v[i] *= k;
  return v;
}

// Serialised embeddings by (model dims, format, text): the bench repeats inputs, and float formatting is slow.
const embeddingCache = new Map<string, string>();
function embeddingJson(text: string, dims: number, base64: boolean): string {
  const key = `${dims}:${base64 ? 'b' : 'f'}:${text}`;
  let s = embeddingCache.get(key);
  if (s === undefined) {
    const v = embed(text, dims);
    s = base64
      ? JSON.stringify(Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64'))
      : JSON.stringify(Array.from(v));
    if (embeddingCache.size >= 512) embeddingCache.clear();
    if (text.length <= 4096) embeddingCache.set(key, s);
  }
  return s;
}

function embeddings(ctl: EmulatorControl) {
  return async (ctx: Koa.Context) => {
    const body = await readJson(ctx);
    ctl.record('POST', ctx.path, ctx.headers, body);
    if (!body) return fail(ctx, 400, 'We could not parse the JSON body of your request.', null, 'invalid_json');
    const input = body.input;
    let texts: string[];
    if (typeof input === 'string') texts = [input];
    else if (Array.isArray(input) && input.length > 0 && input.every((t) => typeof t === 'string')) texts = input;
    else if (Array.isArray(input) && input.length > 0 && input.every((t) => typeof t === 'number'))
      texts = [input.join(',')];
    else if (Array.isArray(input) && input.length > 0 && input.every((t) => Array.isArray(t)))
      texts = input.map((t: unknown[]) => t.join(','));
    else return fail(ctx, 400, "'input' must be a string, an array of strings, or tokens.", 'input', 'invalid_value');
    const native = /large/.test(String(body.model)) ? 3072 : 1536;
    const dims = body.dimensions ?? native;
    if (!Number.isInteger(dims) || dims < 1 || dims > native)
      return fail(ctx, 400, `This model supports dimensions from 1 to ${native}.`, 'dimensions', 'invalid_value');
    const base64 = body.encoding_format === 'base64';
    let promptTokens = 0;
    const items: string[] = [];
    for (let i = 0; i < texts.length; i++) {
      promptTokens += tokens(texts[i].length);
      items.push(`{"object":"embedding","index":${i},"embedding":${embeddingJson(texts[i], dims, base64)}}`);
    }
    recordServed(ctl, 'openai', String(body.model), { embeddingInput: promptTokens });
    ctx.type = 'application/json';
    const usage = `{"prompt_tokens":${promptTokens},"total_tokens":${promptTokens}}`;
    ctx.body = `{"object":"list","data":[${items.join(',')}],"model":${JSON.stringify(body.model)},"usage":${usage}}`;
  };
}

const VOICES = new Set([
  'alloy',
  'ash',
  'ballad',
  'coral',
  'echo',
  'fable',
  'onyx',
  'nova',
  'sage',
  'shimmer',
  'verse',
  'marin',
  'cedar',
]);

function speech(ctl: EmulatorControl) {
  return async (ctx: Koa.Context) => {
    const body = await readJson(ctx);
    ctl.record('POST', ctx.path, ctx.headers, body);
    if (!body) return fail(ctx, 400, 'We could not parse the JSON body of your request.', null, 'invalid_json');
    if (typeof body.input !== 'string' || !body.input)
      return fail(ctx, 400, "Missing required parameter: 'input'.", 'input', 'missing_required_parameter');
    if (!VOICES.has(body.voice))
      return fail(ctx, 400, `Invalid value for 'voice': ${JSON.stringify(body.voice)}.`, 'voice', 'invalid_value');
    const fmt = (body.response_format ?? 'mp3') as AudioFormat;
    if (!AUDIO_FORMATS.includes(fmt))
      return fail(
        ctx,
        400,
        `Invalid value for 'response_format': ${JSON.stringify(fmt)}.`,
        'response_format',
        'invalid_value',
      );
    ctx.type = AUDIO_CONTENT_TYPES[fmt];
    if (ctx.state.emulatorCutAfter !== undefined) {
      // A `cutAfter` fault: half the audio, then the connection is destroyed.
      const audio = audioFixture(fmt);
      ctx.respond = false;
      ctx.res.writeHead(200, { 'content-type': AUDIO_CONTENT_TYPES[fmt] });
      ctx.res.write(audio.subarray(0, audio.length >> 1));
      await sleep(20);
      ctx.res.destroy();
      return;
    }
    // Sent as a chunked stream, as the real endpoint does. Billed by input characters (its usage report).
    recordServed(ctl, 'openai', String(body.model), { characters: [...body.input].length });
    ctx.body = Readable.from([audioFixture(fmt)]);
  };
}

function srtTime(sec: number, sep: string): string {
  const ms = Math.round(sec * 1000);
  const p = (n: number, w = 2) => String(n).padStart(w, '0');
  const [hours, minutes, seconds] = [
    Math.floor(ms / 3_600_000),
    Math.floor(ms / 60_000) % 60,
    Math.floor(ms / 1000) % 60,
  ];
  return `${p(hours)}:${p(minutes)}:${p(seconds)}${sep}${p(ms % 1000, 3)}`;
}

function transcriptions(ctl: EmulatorControl) {
  return async (ctx: Koa.Context) => {
    const form = await readForm(ctx);
    const file = form?.get('file');
    ctl.record(
      'POST',
      ctx.path,
      ctx.headers,
      form
        ? Object.fromEntries(
            [...form.entries()].map(([k, v]) => [k, typeof v === 'string' ? v : `<file ${v.name} ${v.size} bytes>`]),
          )
        : null,
    );
    if (!form) return fail(ctx, 400, 'Malformed multipart body.', null, 'invalid_multipart');
    if (!file || typeof file === 'string')
      return fail(ctx, 400, "Missing required parameter: 'file'.", 'file', 'missing_required_parameter');
    const bytes = new Uint8Array(await file.arrayBuffer());
    if (bytes.length === 0) return fail(ctx, 400, 'The audio file is empty.', 'file', 'invalid_value');
    const duration = audioDurationSeconds(bytes);
    const language =
      typeof form.get('language') === 'string' && form.get('language') ? String(form.get('language')) : 'en';
    const text = `This is a deterministic transcription of ${file.name || 'audio'}, ${duration} seconds long.`;
    const fmt = String(form.get('response_format') ?? 'json');
    // Billed in whole seconds (its `usage.seconds`), on its usage report, when it answers.
    if (['json', 'text', 'srt', 'vtt', 'verbose_json'].includes(fmt))
      recordServed(ctl, 'openai', String(form.get('model') ?? ''), { seconds: Math.ceil(duration) });
    switch (fmt) {
      case 'json':
        ctx.body = { text, usage: { type: 'duration', seconds: Math.ceil(duration) } };
        return;
      case 'text':
        ctx.type = 'text/plain; charset=utf-8';
        ctx.body = text + '\n';
        return;
      case 'srt':
        ctx.type = 'text/plain; charset=utf-8';
        ctx.body = `1\n${srtTime(0, ',')} --> ${srtTime(duration, ',')}\n${text}\n\n`;
        return;
      case 'vtt':
        ctx.type = 'text/plain; charset=utf-8';
        ctx.body = `WEBVTT\n\n${srtTime(0, '.')} --> ${srtTime(duration, '.')}\n${text}\n\n`;
        return;
      case 'verbose_json':
        ctx.body = {
          task: 'transcribe',
          language,
          duration,
          text,
          segments: [
            {
              id: 0,
              seek: 0,
              start: 0,
              end: duration,
              text,
              tokens: [],
              temperature: 0,
              avg_logprob: -0.2,
              compression_ratio: 1.2,
              no_speech_prob: 0.01,
            },
          ],
          usage: { type: 'duration', seconds: Math.ceil(duration) },
        };
        return;
      default:
        return fail(
          ctx,
          400,
          `Invalid value for 'response_format': ${JSON.stringify(fmt)}.`,
          'response_format',
          'invalid_value',
        );
    }
  };
}

// Generated images served for response_format "url" (bounded; the bench does not use them).
const hosted = new Map<string, Buffer>();

function imageData(prompt: string, n: number, size: string, format: string, baseUrl: () => string, salt = ''): Json[] {
  const out: Json[] = [];
  for (let i = 0; i < n; i++) {
    const seed = fnv1a(`${salt}${prompt}#${i}`);
    const png = seededPng(seed, size);
    if (format === 'url') {
      const name = `${seed.toString(16)}-${size}`;
      if (hosted.size > 200) hosted.clear();
      hosted.set(name, png);
      out.push({ url: `${baseUrl()}/openai/v1/_files/images/${name}.png`, revised_prompt: prompt });
    } else {
      out.push({ b64_json: png.toString('base64'), revised_prompt: prompt });
    }
  }
  return out;
}

function imageDefaults(model: unknown, n: unknown, size: unknown, format: unknown) {
  return {
    n: Number(n ?? 1),
    size: typeof size === 'string' && size !== 'auto' ? size : '1024x1024',
    format: typeof format === 'string' ? format : String(model).startsWith('gpt-image') ? 'b64_json' : 'url',
  };
}

function imageGenerations(ctl: EmulatorControl, baseUrl: () => string) {
  return async (ctx: Koa.Context) => {
    const body = await readJson(ctx);
    ctl.record('POST', ctx.path, ctx.headers, body);
    if (!body) return fail(ctx, 400, 'We could not parse the JSON body of your request.', null, 'invalid_json');
    if (typeof body.prompt !== 'string' || !body.prompt)
      return fail(ctx, 400, "Missing required parameter: 'prompt'.", 'prompt', 'missing_required_parameter');
    const d = imageDefaults(body.model, body.n, body.size, body.response_format);
    if (!Number.isInteger(d.n) || d.n < 1 || d.n > 10)
      return fail(ctx, 400, "'n' must be from 1 to 10.", 'n', 'invalid_value');
    recordServed(ctl, 'openai', String(body.model), { images: d.n });
    ctx.body = { created: nowSec(), data: imageData(body.prompt, d.n, d.size, d.format, baseUrl) };
  };
}

function imageEdits(ctl: EmulatorControl, baseUrl: () => string) {
  return async (ctx: Koa.Context) => {
    const form = await readForm(ctx);
    ctl.record(
      'POST',
      ctx.path,
      ctx.headers,
      form
        ? Object.fromEntries(
            [...form.entries()].map(([k, v]) => [k, typeof v === 'string' ? v : `<file ${v.name} ${v.size} bytes>`]),
          )
        : null,
    );
    if (!form) return fail(ctx, 400, 'Malformed multipart body.', null, 'invalid_multipart');
    const image = form.get('image') ?? form.get('image[]');
    if (!image || typeof image === 'string')
      return fail(ctx, 400, "Missing required parameter: 'image'.", 'image', 'missing_required_parameter');
    const bytes = new Uint8Array(await image.arrayBuffer());
    if (!isPng(bytes)) return fail(ctx, 400, 'Invalid image: must be a PNG.', 'image', 'invalid_image_format');
    const mask = form.get('mask');
    if (mask && typeof mask !== 'string' && !isPng(new Uint8Array(await mask.arrayBuffer())))
      return fail(ctx, 400, 'Invalid mask: must be a PNG.', 'mask', 'invalid_image_format');
    const prompt = form.get('prompt');
    if (typeof prompt !== 'string' || !prompt)
      return fail(ctx, 400, "Missing required parameter: 'prompt'.", 'prompt', 'missing_required_parameter');
    const d = imageDefaults(form.get('model'), form.get('n'), form.get('size'), form.get('response_format'));
    if (!Number.isInteger(d.n) || d.n < 1 || d.n > 10)
      return fail(ctx, 400, "'n' must be from 1 to 10.", 'n', 'invalid_value');
    recordServed(ctl, 'openai', String(form.get('model') ?? ''), { images: d.n });
    ctx.body = { created: nowSec(), data: imageData(prompt, d.n, d.size, d.format, baseUrl, `edit:${bytes.length}:`) };
  };
}

/** The POST operations, by path under /openai/v1 (the Azure OpenAI emulation serves the same ones at its URLs). */
export function openaiOperations(ctl: EmulatorControl, baseUrl: () => string): Record<string, Koa.Middleware> {
  return {
    '/chat/completions': chatCompletions(ctl),
    '/completions': completions(ctl),
    '/embeddings': embeddings(ctl),
    '/audio/speech': speech(ctl),
    '/audio/transcriptions': transcriptions(ctl),
    '/images/generations': imageGenerations(ctl, baseUrl),
    '/images/edits': imageEdits(ctl, baseUrl),
  };
}

export const mountOpenAI: Mount = (router: Router, ctl: EmulatorControl, baseUrl: () => string) => {
  const p = '/openai/v1';
  for (const [op, handler] of Object.entries(openaiOperations(ctl, baseUrl))) router.post(p + op, handler);
  router.get(`${p}/_files/images/:name.png`, (ctx) => {
    const png = hosted.get(ctx.params.name);
    if (!png) return fail(ctx, 404, 'No such file.', null, 'not_found');
    ctx.type = 'image/png';
    ctx.body = png;
  });
  router.get(`${p}/models`, (ctx) => {
    ctx.body = {
      object: 'list',
      data: [
        'gpt-4o-mini',
        'gpt-4o',
        'gpt-3.5-turbo-instruct',
        'text-embedding-3-small',
        'tts-1',
        'whisper-1',
        'gpt-image-1',
      ].map((id) => ({ id, object: 'model', created: 1700000000, owned_by: 'emulator' })),
    };
  });
};
