import type { ServerResponse } from 'node:http';
import { EventEmitter } from 'node:events';
import { ApiError } from '../errors';
import type { Ctx } from './middleware';
import type { Meter } from '../billing/meter';
import { StreamUsage } from '../billing/meter';
import { estimatedUsage, fromChatUsage } from '../billing/tokenUsage';
import { costComment, setCostHeaders } from './costReport';
import type { ModelConfig } from '../catalog/catalog';
import { UpstreamAborted, usageFromJson } from '../providers/openai';
import { CLIENT_CLOSED, SseRelay, type RelayOptions } from '../sse/clientRelay';
import type { OpenAICompatibleAdapter } from '../providers/types';
import type { ModelRouter, RouteTry } from '../routing/modelRouter';

/**
 * The request path shared by the OpenAI-compatible routers: forward a serialised body upstream, answer the
 * client (a JSON buffer as received, or SSE piped event by event), and settle or cancel the request's meter.
 */

export { CLIENT_CLOSED };

/**
 * Emits 'abort' (and turns `aborted`) when the client disconnects before its response is complete. An
 * EventEmitter rather than an AbortController: undici takes either as a request signal, and an AbortController's
 * EventTarget set-up costs more than the rest of the cancellation path.
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
export async function callUpstream<T>(
  ctx: Ctx,
  meter: Meter,
  units: Record<string, number>,
  call: () => Promise<T>,
): Promise<T | null> {
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

/**
 * Answers with an upstream JSON body as received (no re-serialisation), written here rather than by Koa's respond:
 * the same status and headers Koa would send, without its type lookup, body setter and length bookkeeping.
 */
export function sendJsonBuffer(ctx: Ctx, body: Buffer): void {
  ctx.status = 200; // for the request log and metrics
  ctx.respond = false;
  const res = ctx.res;
  res.setHeader('content-type', 'application/json; charset=utf-8');
  res.setHeader('content-length', body.length);
  res.end(body);
}

interface TextChoiceLike {
  message?: { content?: unknown; tool_calls?: { function?: { arguments?: unknown } }[] };
  text?: unknown;
}

/** Completion tokens when an upstream answered without usage: ceil(characters / 4) over the returned text. */
function completionCharsOf(json: { choices?: TextChoiceLike[] } | null): number {
  let n = 0;
  for (const c of json?.choices ?? []) {
    if (typeof c.text === 'string') n += c.text.length;
    if (typeof c.message?.content === 'string') n += c.message.content.length;
    for (const t of c.message?.tool_calls ?? [])
      if (typeof t.function?.arguments === 'string') n += t.function.arguments.length;
  }
  return n;
}

/**
 * Runs a single-answer upstream call through the router (retries and fallbacks, src/routing); on final failure
 * cancels the meter as callUpstream does. Returns the answer and the model that gave it (its prices bill it).
 */
export async function callRouted<T>(
  ctx: Ctx,
  router: ModelRouter,
  model: ModelConfig,
  meter: Meter,
  units: Record<string, number>,
  call: (t: RouteTry) => Promise<T>,
): Promise<{ value: T; model: ModelConfig; try: RouteTry } | null> {
  let answered: RouteTry | null = null;
  const value = await callUpstream(ctx, meter, units, () =>
    router.run(
      model,
      (t) => {
        answered = t;
        return call(t);
      },
      meter,
    ),
  );
  const t = answered as RouteTry | null;
  return value === null || !t ? null : { value, model: t.model, try: t };
}

/**
 * A JSON request body whose `model` names the upstream model, serialised for each try: again only when the try's
 * deployment has another upstream name than the last one sent (never on the healthy path).
 */
export class RoutedPayload<B extends { model: string }> {
  payload: string;

  constructor(private readonly body: B) {
    this.payload = JSON.stringify(body);
  }

  for(t: RouteTry): string {
    if (this.body.model !== t.deployment.upstreamModel) {
      this.body.model = t.deployment.upstreamModel;
      this.payload = JSON.stringify(this.body);
    }
    return this.payload;
  }
}

/** What one routed try sends: the adapter of its deployment and the payload naming its upstream model. */
export interface UpstreamTry {
  adapter: OpenAICompatibleAdapter;
  payload: string;
}

/**
 * Non-streaming chat or legacy completion: forward through the router (retries and fallbacks until an answer, see
 * src/routing), bill the answering model's price on the upstream's usage (or, if an upstream omits it,
 * ceil(bytes/4) prompt and ceil(chars/4) completion tokens), answer with the upstream's bytes.
 */
export async function forwardCompletionJson(
  ctx: Ctx,
  router: ModelRouter,
  model: ModelConfig,
  path: string,
  prepare: (t: RouteTry) => UpstreamTry,
  payloadBytes: number,
  meter: Meter,
): Promise<void> {
  const signal = clientAbortSignal(ctx.res);
  let answered = model;
  const res = await callUpstream(ctx, meter, {}, () =>
    router.run(
      model,
      (t) => {
        answered = t.model;
        const u = prepare(t);
        return u.adapter.postJson(path, u.payload, { signal });
      },
      meter,
    ),
  );
  if (!res) return;
  const usage = usageFromJson(res.body);
  if (usage) meter.settleTokens(answered.pricing, fromChatUsage(usage));
  else {
    let json: { choices?: TextChoiceLike[] } | null = null;
    try {
      json = JSON.parse(res.body.toString('utf8'));
    } catch {
      meter.cancel({}, 502);
      throw new ApiError(
        502,
        'The upstream provider returned an invalid response.',
        'upstream_error',
        null,
        'upstream_error',
      );
    }
    meter.settleTokens(answered.pricing, estimatedUsage(payloadBytes, completionCharsOf(json)));
  }
  setCostHeaders(ctx.res, meter);
  sendJsonBuffer(ctx, res.body);
}

/**
 * Streaming chat or legacy completion. The gateway always asks the upstream for usage; SseRelay writes the events
 * to the client as each network chunk arrives, drops the usage-only chunk unless the client asked for it, and ends
 * with `data: [DONE]`. A client disconnect aborts the upstream request. Tries that fail before the stream starts
 * are retried by the router (the relay is untouched until an upstream answers 2xx); once it has started, a failure
 * ends the client's stream with an error event. Billing, at the answering model's price: the upstream's usage if it arrived,
 * else the delivered-text rule of StreamUsage; a stream cut by the upstream ends with an error event and is billed
 * the same way.
 */
export async function forwardCompletionStream(
  ctx: Ctx,
  router: ModelRouter,
  model: ModelConfig,
  path: string,
  prepare: (t: RouteTry) => UpstreamTry,
  payloadBytes: number,
  meter: Meter,
  opts: RelayOptions,
): Promise<void> {
  const signal = clientAbortSignal(ctx.res);
  const acc = new StreamUsage(payloadBytes, opts.kind);
  let answered: RouteTry | null = null;
  // Settled as the relay ends the stream, so its cost goes out as the last comment (before `data: [DONE]`).
  const beforeEnd = (status: number) => {
    if (status !== 200) ctx.state.endedWith = status; // for the request log and metrics, written as the response closes
    meter.settleTokens(answered!.model.pricing, acc.usageTokens(), status);
    return costComment(meter);
  };
  const relay = new SseRelay(ctx.res, signal, acc, { ...opts, beforeEnd });
  const ok = await callUpstream(ctx, meter, {}, () =>
    router
      .run(
        model,
        (t) => {
          answered = t;
          const u = prepare(t);
          return u.adapter.streamTo(path, u.payload, relay, { signal });
        },
        meter,
      )
      .then(() => true),
  );
  if (!ok) return;
  ctx.respond = false;
  const t = answered as RouteTry | null;
  if (relay.status === 502 && t) router.streamCut(t);
  meter.settleTokens(t!.model.pricing, acc.usageTokens(), relay.status); // the client left: billed as it ended (no-op once settled)
}
