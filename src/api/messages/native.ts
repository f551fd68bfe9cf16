import type { AppDeps } from '../deps';
import type { Ctx } from '../middleware';
import type { ModelConfig } from '../../catalog/catalog';
import { checkOutputCap } from '../../catalog/outputCap';
import type { MessagesRequest } from '../../translate/anthropicTypes';
import { formatSse } from '../../sse/translatedEvents';
import { rewriteRegion, SseRegions, type SseRegion } from '../../sse/eventRegions';
import { redactorFor } from '../../catalog/redact';
import type { SseSink } from '../../sse/clientSink';
import { isUpstreamError } from '../../providers/upstreamError';
import type { MessagesUpstream } from '../../providers/messagesUpstream';
import { boundOverCandidates } from '../../routing/bound';
import type { RouteTry } from '../../routing/modelRouter';
import type { Meter } from '../../billing/meter';
import { countImages, nativeBound } from '../../billing/nativeBound';
import { estimatedUsage, fromAnthropicUsage, tokenUsage, type AnthropicUsageLike } from '../../billing/tokenUsage';
import { costComment, setCostHeaders } from '../costReport';
import { reserve } from '../reserve';
import { failureStatus, RoutedPayload } from '../upstream';

/**
 * POST /v1/messages on a model served over Anthropic Messages (an `anthropic` provider, Claude on `bedrock` or
 * `vertex`; deployments may mix them): the body goes upstream as sent (model renamed), the
 * answer and its SSE come back as produced, usage read from the stream as it passes.
 */

const OPERATION = 'messages';

/** The Anthropic request headers passed upstream. */
export function anthropicHeaders(ctx: Ctx) {
  return { version: ctx.get('anthropic-version'), beta: ctx.get('anthropic-beta') || undefined };
}

/** Native pass-through: the body goes upstream as sent (model renamed), the answer comes back as produced. */
export async function nativeMessages(
  ctx: Ctx,
  deps: AppDeps,
  model: ModelConfig,
  adapter: MessagesUpstream,
  req: MessagesRequest,
  sink: SseSink,
): Promise<void> {
  checkOutputCap(model, 'max_tokens', req.max_tokens);
  const payloads = new RoutedPayload({ ...req, model: model.upstreamModel });
  const bytes = Buffer.byteLength(payloads.payload);
  const images = countImages(req.messages);
  // Reserved once for the most expensive model and deployment that may answer (retries and fallbacks included).
  const bound = boundOverCandidates(deps.catalog, deps.router, model, (m, extra) =>
    nativeBound(m, bytes + extra, req.max_tokens, images),
  );
  const meter = await reserve(ctx, deps, model.id, OPERATION, bound.maxCost, bound.maxTokens);
  const headers = anthropicHeaders(ctx);
  let answered = model;
  let answeredTry: RouteTry | null = null;
  const routed = <R>(call: (a: MessagesUpstream, payload: string) => Promise<R>): Promise<R> =>
    deps.router
      .run(
        model,
        (t) => {
          answered = t.model;
          answeredTry = t;
          const a = deps.providers.forDeployment(t.deployment)?.messagesFor?.(t.deployment.upstreamModel);
          return call(a ?? adapter, payloads.for(t));
        },
        meter,
      )
      .catch((e: unknown) => {
        meter.cancel({}, isUpstreamError(e, 'anthropic') ? e.status : failureStatus(e));
        throw e;
      });
  if (req.stream !== true) {
    // The body is read inside the try: a connection reset after the headers is retried elsewhere and cools its deployment.
    const res = await routed((a, payload) => a.messagesWhole(payload, headers, { signal: sink.signal }));
    const raw = res.raw;
    let usage: AnthropicUsageLike | null = null;
    try {
      usage = (JSON.parse(raw.toString('utf8')) as { usage?: AnthropicUsageLike }).usage ?? null;
    } catch {}
    meter.settleTokens(
      answered.pricing,
      typeof usage?.input_tokens === 'number' && typeof usage.output_tokens === 'number'
        ? fromAnthropicUsage(usage)
        : estimatedUsage(bytes, raw.length),
    );
    setCostHeaders(ctx.res, meter);
    for (const [k, v] of Object.entries(res.headers)) ctx.set(k, v);
    ctx.status = res.status;
    ctx.type = res.contentType || 'application/json';
    ctx.body = raw;
    return;
  }
  const res = await routed((a, payload) => a.messages(payload, headers, { signal: sink.signal }));
  // A stream the upstream breaks off after its first byte is not retried, but cools its deployment.
  if ((await pipeNativeStream(deps, answered, meter, res.body, res.headers, bytes, sink)) && answeredTry)
    deps.router.streamCut(answeredTry);
}

/**
 * Forwards the upstream's events as they complete, reading usage from them as they pass; true if the upstream cut
 * it. An error event reaches the client without catalog internals.
 */
async function pipeNativeStream(
  deps: AppDeps,
  model: ModelConfig,
  meter: Meter,
  body: AsyncIterable<Uint8Array>,
  headers: Record<string, string>,
  bytes: number,
  sink: SseSink,
): Promise<boolean> {
  sink.open(headers);
  const regions = new SseRegions();
  const redact = redactorFor(deps.catalog);
  // Anthropic's usage as it stands: message_start's, then each field message_delta repeats (cumulative counts).
  let usage = null as AnthropicUsageLike | null; // (assigned in the closure below: not narrowed to null)
  let delivered = 0;
  let stopped = false;
  let failed = false;
  /** Reads one event; an error's data comes back redacted for the client, anything else as null (unchanged). */
  const observe = (data: string): string | null => {
    let e: any;
    try {
      e = JSON.parse(data);
    } catch {
      return null;
    }
    if (e?.type === 'message_start') {
      usage = { ...(e.message?.usage ?? {}) };
    } else if (e?.type === 'content_block_delta') {
      const d = e.delta ?? {};
      delivered += (d.text?.length ?? 0) + (d.thinking?.length ?? 0) + (d.partial_json?.length ?? 0);
    } else if (e?.type === 'message_delta') {
      for (const [k, v] of Object.entries(e.usage ?? {}))
        if (v !== null && v !== undefined) (usage ??= {})[k as keyof AnthropicUsageLike] = v as never;
    } else if (e?.type === 'message_stop') stopped = true;
    else if (e?.type === 'error') {
      failed = true;
      return redact(data);
    }
    return null;
  };
  const forward = (region: SseRegion | null) =>
    region ? sink.write(rewriteRegion(region, (ev) => observe(ev.data))) : true;
  try {
    for await (const chunk of body) if (!(await forward(regions.push(chunk)))) break;
    await forward(regions.end()); // an unterminated last event still counts
  } catch (e) {
    if (!sink.clientGone) {
      failed = true;
      deps.logger.warn({ reqId: meter.id, err: (e as Error).message }, 'anthropic upstream stream failed');
      await sink.write(
        formatSse({
          event: 'error',
          data: {
            type: 'error',
            error: { type: 'api_error', message: 'The upstream provider stream was interrupted.' },
          },
        }),
      );
    }
  }
  const complete = stopped && typeof usage?.input_tokens === 'number' && typeof usage.output_tokens === 'number';
  let t = complete ? fromAnthropicUsage(usage!) : estimatedUsage(bytes, delivered);
  if (!complete && typeof usage?.input_tokens === 'number') {
    // Cut short after message_start: its input and cache counts are the upstream's; the output is estimated.
    const known = fromAnthropicUsage(usage);
    t = tokenUsage({ ...known, output: Math.max(known.output, t.output), estimated: true });
  }
  meter.settleTokens(model.pricing, t, complete ? 200 : sink.clientGone ? 499 : failed ? 502 : 200);
  if (!sink.clientGone) await sink.write(costComment(meter));
  sink.end();
  return failed && !sink.clientGone;
}
