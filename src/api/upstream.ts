import type { ServerResponse } from 'node:http';
import { EventEmitter } from 'node:events';
import type { Readable } from 'node:stream';
import { ApiError, openAIBody } from './errors';
import type { Ctx } from './middleware';
import type { Meter } from '../billing/meter';
import { StreamUsage } from '../billing/meter';
import { tokensCost, tokensFromChars } from '../billing/pricing';
import type { ModelConfig } from '../catalog/catalog';
import { UpstreamAborted, usageFromJson } from '../providers/openai';
import { SSE_DONE, SSE_HEADERS, SseDecoder } from '../providers/sse';
import type { OpenAICompatibleAdapter } from '../providers/types';

/**
 * The request path shared by the OpenAI-compatible routers: forward a serialised body upstream, answer the
 * client (a JSON buffer as received, or SSE piped event by event), and settle or cancel the request's meter.
 */

/** Status recorded for a request whose client went away before the answer was complete (nginx's 499). */
export const CLIENT_CLOSED = 499;

/**
 * Emits 'abort' (and turns `aborted`) when the client disconnects before its response is complete. An
 * EventEmitter rather than an AbortController: undici takes either as a request signal, and an AbortController
 * per request cost about 9 µs of CPU (EventTarget set-up), more than the rest of the cancellation path.
 */
export class ClientGone extends EventEmitter {
  aborted = false;

  constructor(res: ServerResponse) {
    super();
    res.once('close', () => {
      if (res.writableFinished) return;
      this.aborted = true;
      this.emit('abort');
    });
  }
}

/** A signal that fires if the client disconnects before its response is complete. */
export function clientAbortSignal(res: ServerResponse): ClientGone {
  return new ClientGone(res);
}

/** Status to record for a failed upstream call. */
export function failureStatus(e: unknown): number {
  if (e instanceof UpstreamAborted) return CLIENT_CLOSED;
  return e instanceof ApiError ? e.status : 500;
}

/** Runs the upstream call; on failure cancels the meter (nothing charged) and rethrows (or ends quietly if the client left). */
export async function callUpstream<T>(ctx: Ctx, meter: Meter, units: Record<string, number>, call: () => Promise<T>): Promise<T | null> {
  try {
    return await call();
  } catch (e) {
    meter.cancel(units, failureStatus(e));
    if (e instanceof UpstreamAborted) {
      ctx.status = CLIENT_CLOSED; // for logs and metrics; nobody is left to answer
      ctx.respond = false;
      return null;
    }
    throw e;
  }
}

/** Answers with an upstream JSON body as received (no re-serialisation). */
export function sendJsonBuffer(ctx: Ctx, body: Buffer): void {
  ctx.status = 200;
  ctx.type = 'application/json';
  ctx.body = body;
}

interface TextChoiceLike { message?: { content?: unknown; tool_calls?: { function?: { arguments?: unknown } }[] }; text?: unknown }

/** Completion tokens when an upstream answered without usage: ceil(characters / 4) over the returned text. */
function completionCharsOf(json: { choices?: TextChoiceLike[] } | null): number {
  let n = 0;
  for (const c of json?.choices ?? []) {
    if (typeof c.text === 'string') n += c.text.length;
    if (typeof c.message?.content === 'string') n += c.message.content.length;
    for (const t of c.message?.tool_calls ?? []) if (typeof t.function?.arguments === 'string') n += t.function.arguments.length;
  }
  return n;
}

/**
 * Non-streaming chat or legacy completion: forward, bill the upstream's usage (or, if an upstream omits it,
 * ceil(bytes/4) prompt and ceil(chars/4) completion tokens), answer with the upstream's bytes.
 */
export async function forwardCompletionJson(ctx: Ctx, adapter: OpenAICompatibleAdapter, path: string, payload: string, payloadBytes: number, model: ModelConfig, meter: Meter): Promise<void> {
  const res = await callUpstream(ctx, meter, {}, () => adapter.postJson(path, payload, { signal: clientAbortSignal(ctx.res) }));
  if (!res) return;
  let usage = usageFromJson(res.body);
  let estimated = 0;
  if (!usage) {
    let json: { choices?: TextChoiceLike[] } | null = null;
    try {
      json = JSON.parse(res.body.toString('utf8'));
    } catch {
      meter.cancel({}, 502);
      throw new ApiError(502, 'The upstream provider returned an invalid response.', 'upstream_error', null, 'upstream_error');
    }
    usage = { prompt_tokens: tokensFromChars(payloadBytes), completion_tokens: tokensFromChars(completionCharsOf(json)) };
    estimated = 1;
  }
  const prompt = Math.max(0, Math.ceil(Number(usage.prompt_tokens) || 0));
  const completion = Math.max(0, Math.ceil(Number(usage.completion_tokens) || 0));
  meter.settle(tokensCost(model.pricing, prompt, completion), estimated ? { prompt_tokens: prompt, completion_tokens: completion, estimated } : { prompt_tokens: prompt, completion_tokens: completion });
  sendJsonBuffer(ctx, res.body);
}

function waitDrain(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}

export interface StreamOptions {
  kind: 'chat' | 'completion';
  /** Whether the client asked for the usage chunk (stream_options.include_usage); it is stripped otherwise. */
  clientWantsUsage: boolean;
}

/**
 * Streaming chat or legacy completion. The gateway always asks the upstream for usage; events are forwarded as
 * each network chunk arrives (one write per chunk, no buffering), the usage-only chunk is dropped unless the
 * client asked for it, and `data: [DONE]` ends the stream. A client disconnect aborts the upstream request.
 * Billing: the upstream's usage if it arrived, else the delivered-text rule of StreamUsage; a stream cut by the
 * upstream ends with an error event and is billed the same way.
 */
export async function forwardCompletionStream(ctx: Ctx, adapter: OpenAICompatibleAdapter, path: string, payload: string, payloadBytes: number, model: ModelConfig, meter: Meter, opts: StreamOptions): Promise<void> {
  const res = ctx.res;
  const signal = clientAbortSignal(res);
  const up = await callUpstream(ctx, meter, {}, () => adapter.postStream(path, payload, { signal }));
  if (!up) return;
  ctx.respond = false;
  res.writeHead(200, SSE_HEADERS);
  // The client sees the stream open at once even if the first token takes a while; when the upstream's first
  // bytes came with its headers, the headers go out with them instead (one write, not two).
  if (up.body.readableLength === 0) res.flushHeaders();
  const acc = new StreamUsage(payloadBytes, opts.kind);
  const status = await pipeEvents(up.body, res, signal, acc, opts);
  const t = acc.tokens();
  const units: Record<string, number> = { prompt_tokens: t.prompt, completion_tokens: t.completion };
  if (t.estimated) units.estimated = 1;
  meter.settle(tokensCost(model.pricing, t.prompt, t.completion), units, status);
}

/**
 * Whether an event's JSON may hold `key` (with an object value when `objectOnly`). Inside JSON strings every
 * quote is escaped, so the unescaped `"usage":` can only be a key; `"usage":null` (sent on every chunk by
 * OpenAI with include_usage) is not usage.
 */
function mayCarry(data: string, key: string, objectOnly: boolean): boolean {
  let i = data.indexOf(key);
  while (i >= 0) {
    if (!objectOnly) return true;
    let j = i + key.length;
    while (data.charCodeAt(j) === 32) j++;
    if (data.charCodeAt(j) === 123 /* { */) return true;
    i = data.indexOf(key, j);
  }
  return false;
}

/**
 * A content event: not [DONE], no usage object, no error (so it is forwarded untouched). `errorScan` false says
 * the event's bytes are known to hold no `"error":` (checked once over the whole network chunk). Content chunks
 * sent with include_usage end in `"usage":null}` (OpenAI puts usage last), which settles the usage question
 * without a scan; only top-level usage is ever billed, so a nested one would not change the outcome.
 */
function isPlainEvent(ev: { data: string }, errorScan: boolean): boolean {
  const d = ev.data;
  return d !== '[DONE]' && (d.endsWith('"usage":null}') || !mayCarry(d, '"usage":', true)) && (!errorScan || !mayCarry(d, '"error":', false));
}

/** Whether a chunk ends with the blank line that terminates an SSE event. */
function endsAtEventBoundary(b: Buffer): boolean {
  const n = b.length;
  return (n >= 2 && b[n - 1] === 10 && (b[n - 2] === 10 || (n >= 4 && b[n - 2] === 13 && b[n - 3] === 10 && b[n - 4] === 13))) || (n >= 2 && b[n - 1] === 13 && b[n - 2] === 13);
}

/** Reads a response body to its end, discarding it (the connection is reused only once the body is consumed). */
function drain(body: Readable): void {
  if (body.readableEnded) return;
  body.on('error', () => undefined);
  body.resume();
}

/** Returns the status to record: 200 complete, 499 client gone, 502 cut by the upstream. */
async function pipeEvents(body: Readable, res: ServerResponse, signal: ClientGone, acc: StreamUsage, opts: StreamOptions): Promise<number> {
  const dec = new SseDecoder();
  const chat = opts.kind === 'chat';
  let upstreamError: unknown = null;
  let ended = false;
  // Whether the bytes so far ended exactly at an event boundary (so a chunk can be forwarded byte for byte).
  let aligned = true;
  try {
    for await (const chunk of body.iterator({ destroyOnReturn: false })) {
      const buf = chunk as Buffer;
      const events = dec.push(buf);
      const startsAligned = aligned;
      aligned = endsAtEventBoundary(buf);
      if (events.length === 0) continue;
      // An event that began in an earlier chunk has bytes this chunk does not show: scan each event then.
      const errorScan = !startsAligned || buf.includes('"error":');
      if (startsAligned && aligned && events.every((ev) => isPlainEvent(ev, errorScan))) {
        // The common case: whole content events, nothing to strip or inspect. Forward the upstream's own bytes
        // (no string building, no re-encoding: that was a third of the stream path's CPU).
        for (const ev of events) acc.defer(ev.data);
        if (signal.aborted) break;
        if (!res.write(buf)) await waitDrain(res);
        continue;
      }
      // Whole content events ahead of the first one that needs handling (typically the usage chunk and [DONE]
      // arriving together with the last tokens) still go out as the upstream's own bytes.
      let first = 0;
      let head: Buffer | null = null;
      if (startsAligned) {
        let k = 0;
        while (k < events.length && isPlainEvent(events[k], errorScan)) k++;
        const e = events[k];
        if (k > 0 && e && (!e.event || e.event === 'message') && !e.id) {
          const at = buf.indexOf('data: ' + e.data);
          if (at > 0) {
            head = buf.subarray(0, at);
            for (let i = 0; i < k; i++) acc.defer(events[i].data);
            first = k;
          }
        }
      }
      let out = '';
      let done = false;
      for (let i = first; i < events.length; i++) {
        const ev = events[i];
        const data = ev.data;
        if (data === '[DONE]') {
          done = true;
          break; // nothing follows [DONE] in this protocol
        }
        if (isPlainEvent(ev, errorScan)) {
          // A plain content chunk: forward it as is; its text is counted only if the estimate is ever needed.
          acc.defer(data);
          out += ev.event && ev.event !== 'message' ? `event: ${ev.event}\ndata: ${data}\n\n` : `data: ${data}\n\n`;
          continue;
        }
        let parsed: any;
        try {
          parsed = JSON.parse(data);
        } catch {
          out += `data: ${data}\n\n`; // not ours to judge: pass it on
          continue;
        }
        if (parsed && parsed.error) {
          upstreamError = parsed.error;
          out += `data: ${data}\n\n`;
          continue;
        }
        const usageOnly = chat ? acc.observeChat(parsed) : acc.observeCompletion(parsed);
        if (usageOnly && !opts.clientWantsUsage) continue;
        out += ev.event && ev.event !== 'message' ? `event: ${ev.event}\ndata: ${data}\n\n` : `data: ${data}\n\n`;
      }
      if (signal.aborted) break;
      if (done) {
        // The stream is complete: answer the client now, in one write with the terminator, and drain the upstream
        // to its end so its connection goes back to the pool.
        if (head) {
          res.cork(); // end() uncorks: head, tail and terminator leave in one syscall
          res.write(head);
        }
        res.end(out + SSE_DONE);
        ended = true;
        break;
      }
      let ok = true;
      if (head) {
        res.cork(); // one syscall for the raw head and the rewritten tail
        ok = res.write(head);
        if (out) ok = res.write(out);
        res.uncork();
      } else if (out) ok = res.write(out);
      if (!ok) await waitDrain(res);
    }
  } catch (e) {
    if (!body.destroyed) body.destroy(); // the iterator leaves it open (destroyOnReturn: false)
    if (signal.aborted) return CLIENT_CLOSED;
    upstreamError = upstreamError ?? e;
  }
  if (ended) {
    drain(body);
    return 200;
  }
  if (signal.aborted) {
    body.destroy();
    return CLIENT_CLOSED;
  }
  if (upstreamError) {
    // A transport failure gets an error event (the OpenAI SDK raises it); an upstream error event was forwarded.
    if (upstreamError instanceof Error) res.write(`data: ${JSON.stringify(openAIBody(new ApiError(502, 'The upstream provider ended the stream early.', 'upstream_error', null, 'upstream_error')))}\n\n`);
    res.end();
    return 502;
  }
  res.end(SSE_DONE);
  return 200;
}
