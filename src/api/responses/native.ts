import type { AppDeps } from '../deps';
import type { Ctx } from '../middleware';
import { ApiError } from '../../errors';
import { checkOutputCap } from '../../catalog/outputCap';
import type { ResponseObject } from '../../translate/responsesTypes';
import { newId } from '../../translate/chatToResponses';
import { formatSse } from '../../sse/translatedEvents';
import type { EventSourceMessage } from '../../sse/upstreamEvents';
import { rewriteRegion, SseRegions, type SseRegion } from '../../sse/eventRegions';
import { redactorFor } from '../../catalog/redact';
import type { OpenAICompatibleAdapter } from '../../providers/types';
import { DEFAULT_MAX_OUTPUT_TOKENS } from '../../billing/pricing';
import type { Meter } from '../../billing/meter';
import { countImages, nativeBound } from '../../billing/nativeBound';
import { estimatedUsage } from '../../billing/tokenUsage';
import { costComment, setCostHeaders } from '../costReport';
import { reserve } from '../reserve';
import { failureStatus, RoutedPayload } from '../upstream';
import { boundOverCandidates } from '../../routing/bound';
import type { RouteTry } from '../../routing/modelRouter';
import { storeTurn, usageOf, type Turn } from './turn';

/**
 * POST /v1/responses on a model marked `api: "responses"`: passed through to its upstream's /responses (the
 * stored conversation's items prepended), SSE forwarded as produced, usage and the final response read as they pass.
 */

const OPERATION = 'responses';
const TERMINAL = new Set(['response.completed', 'response.incomplete', 'response.failed']);

/** Native pass-through to an upstream /responses. */
export async function nativeResponses(ctx: Ctx, deps: AppDeps, t: Turn): Promise<void> {
  checkOutputCap(t.model, 'max_output_tokens', t.req.max_output_tokens);
  deps.providers.openai(t.model); // a misconfigured provider is refused before funds are reserved
  const body: { model: string; [k: string]: unknown } = {
    ...t.req,
    model: t.model.upstreamModel,
    input: [...t.history, ...t.input],
  };
  delete body.previous_response_id;
  const payloads = new RoutedPayload(body);
  const bytes = Buffer.byteLength(payloads.payload);
  const images = countImages(body.input);
  // Reserved once for the most expensive model and deployment that may answer (retries and fallbacks included).
  const bound = boundOverCandidates(deps.catalog, deps.router, t.model, (m, extra) =>
    nativeBound(m, bytes + extra, t.req.max_output_tokens ?? m.maxOutputTokens ?? DEFAULT_MAX_OUTPUT_TOKENS, images),
  );
  const meter = await reserve(ctx, deps, t.model.id, OPERATION, bound.maxCost, bound.maxTokens);
  let answered = t.model;
  let answeredTry: RouteTry | null = null;
  const routed = <R>(call: (adapter: OpenAICompatibleAdapter, payload: string) => Promise<R>) =>
    deps.router.run(
      t.model,
      (r) => {
        answered = r.model;
        answeredTry = r;
        return call(deps.providers.openaiFor(r.deployment), payloads.for(r));
      },
      meter,
    );
  if (t.req.stream !== true) {
    let obj: ResponseObject;
    let raw: Buffer;
    try {
      raw = (await routed((a, payload) => a.postJson('/responses', payload, { signal: t.sink.signal }))).body;
      obj = JSON.parse(raw.toString('utf8')) as ResponseObject;
      if (obj === null || typeof obj !== 'object' || Array.isArray(obj)) throw new SyntaxError('not a response object');
    } catch (e) {
      meter.cancel({}, e instanceof SyntaxError ? 502 : failureStatus(e));
      if (e instanceof SyntaxError)
        throw new ApiError(
          502,
          'The upstream provider sent an invalid response.',
          'upstream_error',
          null,
          'upstream_error',
        );
      throw e;
    }
    meter.settleTokens(answered.pricing, usageOf(obj) ?? estimatedUsage(bytes, raw.length));
    setCostHeaders(ctx.res, meter);
    ctx.type = 'application/json';
    // Text Postgres cannot hold is stored as U+FFFD, so only an outage fails here: then say it was not stored.
    ctx.body = (await storeTurn(ctx, deps, t, obj)) ? raw : { ...obj, store: false };
    return;
  }
  let res;
  try {
    res = await routed((a, payload) => a.postStream('/responses', payload, { signal: t.sink.signal }));
  } catch (e) {
    meter.cancel({}, failureStatus(e));
    throw e;
  }
  // A stream the upstream breaks off after its first byte is not retried, but cools its deployment.
  if ((await pipeNativeStream(ctx, deps, { ...t, model: answered }, meter, res.body, bytes)) && answeredTry)
    deps.router.streamCut(answeredTry);
}

/**
 * Forwards the upstream's events as they complete; reads usage and the final response as they pass. True if the
 * upstream cut it. The final event is corrected before it leaves when the turn was to be stored and was not
 * (`store: false`, so no client is promised a response GET /v1/responses/{id} cannot find); error events, and the
 * error of a failed response, reach the client without catalog internals.
 */
async function pipeNativeStream(
  ctx: Ctx,
  deps: AppDeps,
  t: Turn,
  meter: Meter,
  body: AsyncIterable<Uint8Array>,
  bytes: number,
): Promise<boolean> {
  const sink = t.sink;
  sink.open();
  const redact = redactorFor(deps.catalog);
  const regions = new SseRegions();
  let lastSeq = -1;
  let shell: Record<string, unknown> | null = null;
  let final: Record<string, unknown> | null = null;
  let delivered = 0;
  let failed = false;
  const settle = (status: number) => {
    const u = final ? usageOf(final as ResponseObject) : null;
    meter.settleTokens(t.model.pricing, u ?? estimatedUsage(bytes, delivered), u ? 200 : status);
  };
  /** Reads one event; returns its data as the client gets it when that differs from the upstream's, else null. */
  const observe = async (ev: EventSourceMessage): Promise<string | null> => {
    let e: any;
    try {
      e = JSON.parse(ev.data);
    } catch {
      return null;
    }
    if (typeof e?.sequence_number === 'number') lastSeq = e.sequence_number;
    if (typeof e?.delta === 'string') delivered += e.delta.length;
    if (e?.type === 'response.created' || e?.type === 'response.in_progress') shell = e.response ?? shell;
    let data: string | null = null;
    if (TERMINAL.has(e?.type) && !final && e.response && typeof e.response === 'object') {
      final = e.response as Record<string, unknown>;
      // Stored before the client sees the final event, so an immediate continuation finds it.
      const stored = final.status !== 'failed' && (await storeTurn(ctx, deps, t, final));
      if (t.store && !stored && final.store !== false) {
        final.store = false;
        data = JSON.stringify(e);
      }
    }
    return e?.type === 'error' || e?.type === 'response.failed' ? redact(data ?? ev.data) : data;
  };
  const forward = async (region: SseRegion | null): Promise<boolean> => {
    if (!region) return true;
    const changed = new Map<EventSourceMessage, string>();
    for (const ev of region.events) {
      const data = await observe(ev);
      if (data !== null) changed.set(ev, data);
    }
    if (sink.ended) return true; // the answer is complete: let the upstream finish its response (connection reuse)
    if (!(await sink.write(rewriteRegion(region, (ev) => changed.get(ev) ?? null)))) return false;
    if (final) {
      settle(200);
      await sink.write(costComment(meter));
      sink.end();
    }
    return true;
  };
  try {
    for await (const chunk of body) if (!(await forward(regions.push(chunk)))) break;
    if (!sink.clientGone) await forward(regions.end());
  } catch (e) {
    if (!sink.clientGone)
      deps.logger.warn({ reqId: meter.id, err: (e as Error).message }, 'responses upstream stream failed');
  }
  if (!final && !sink.clientGone) {
    // Clients (Codex) need a terminal event; the upstream stopped without one. Nothing was stored.
    failed = true;
    const response = {
      ...(shell ?? { id: newId('resp'), object: 'response', model: t.req.model, output: [] }),
      status: 'failed',
      store: false,
      error: { code: 'server_error', message: 'The upstream provider stream was interrupted.' },
    };
    await sink.write(
      formatSse({
        event: 'response.failed',
        data: { type: 'response.failed', sequence_number: lastSeq + 1, response },
      }),
    );
  }
  settle(sink.clientGone ? 499 : failed ? 502 : 200); // a no-op when settled at the terminal event
  if (!sink.clientGone && !sink.ended) await sink.write(costComment(meter));
  sink.end();
  return failed && !sink.clientGone;
}
