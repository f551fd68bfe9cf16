import type { AccountBilling, Billing, Caller, OperationDeps } from './caller';
import { ApiError } from '../errors';
import { CLIENT_CLOSED, ClientClosed, type RequestAbort } from '../net';
import { Meter, openMeter, reserveOrRefuse } from './meter';
import { usageUnits, type TokenUsage } from '../billing';
import type { ModelConfig, Pricing } from '../catalog';
import type { Principal } from '../auth';
import { hasBudget } from '../limits';
import type { RateLimiter, TokenTicket } from '../limits';
import type { ModelRouter, RouteRecorder, RouteTry } from './modelRouter';
import type { Span } from '@opentelemetry/api';
import { tracer, type HeldTry } from '../observability';
import type { CallOptions, ProviderRegistry } from '../providers';
import type { Estimate } from './estimate';
import type { Upstream } from './upstreams';
import { sseComment } from '../sse';
import { admitRequest, hasRateLimits, unitTokens } from './rateLimit';
import { affinityOf } from './affinity';

/**
 * One synchronous request's billed call upstream, the one path every API family takes:
 *
 *   const call = await openCall(caller, deps, model, 'chat.completions', estimate);   // 429, 402 here
 *   const answer = await call.attempt(openaiUpstream, (a, t) => a.postJson(..., call.tryOptions)); // tries
 *   call.settle(usage, status);                                                        // once
 *
 * openCall admits the request against the key's rate limits and reserves its estimate's maximum cost; `attempt`
 * (or `run`, for a caller that picks its own backend: src/modelCall/routedBackend.ts) tries the model's
 * deployments and fallbacks until one answers before its first byte (src/modelCall), remembering the answered model
 * whose prices bill it; `settle` (or `cancel`, when nothing answered) charges the meter and corrects the key's
 * token window, once: the rate limit is admitted and settled here and nowhere else. The caller's RequestAbort
 * (`abort`, src/net/abort.ts) aborts when the client goes away, its reason a ClientClosed; the upstream call then
 * throws that reason, and the error handler ends the response quietly (nobody is left to answer).
 */

/** Status to record for a failed upstream call (499 when the client left). */
export function failureStatus(e: unknown): number {
  if (e instanceof ClientClosed) return CLIENT_CLOSED;
  const status = (e as { status?: unknown } | null)?.status;
  return e instanceof ApiError || typeof status === 'number' ? (status as number) : 500;
}

export class RoutedCall implements RouteRecorder {
  readonly abort: RequestAbort;
  /** The usage units recorded when no upstream answers (speech records its characters). */
  unitsIfUnanswered: Record<string, number> = {};
  /**
   * The answering try of a stream read by a relay, while tracing records the request: the relay feeds it what
   * passes (first token, finish reasons, the model, content), and the settlement ends its span.
   */
  held: HeldTry | null = null;
  private answeredTry: RouteTry | null = null;
  /** The request's span while it is sampled: the tries' spans and the settlement are recorded under it. */
  readonly traceSpan: Span | null;
  /**
   * The span of the try in flight, for its upstream call (traceparent, the answer's watch). Unsampled, the request's
   * own (not recording) when the client sent a trace: the upstream still gets it, marked not sampled, as W3C trace
   * context asks; a trace the gateway began and does not record is not worth the upstream's time (nor ours).
   */
  private trySpan: Span | null = null;
  private holding = false;
  private tryStarted = 0;

  constructor(
    private readonly caller: Caller,
    private readonly router: ModelRouter,
    /** The upstream adapters `attempt` hands over (absent: only `run` is used, as in unit tests). */
    private readonly providers: ProviderRegistry | undefined,
    /** The requested model (its fallbacks may answer instead). */
    readonly model: ModelConfig,
    readonly meter: Meter,
    private readonly ticket: TokenTicket | null,
    private readonly limiter: Pick<RateLimiter, 'settle'> | null,
  ) {
    this.abort = caller.abort;
    const span = caller.span;
    this.traceSpan = span && span.isRecording() ? span : null;
    if (span && tracer?.propagates(span)) this.trySpan = span;
  }

  private handle: string | null | undefined;

  /** The request's prompt-cache handle, which routes it (src/modelCall/affinity.ts); worked out on first need. */
  get affinity(): string | null {
    if (this.handle === undefined) this.handle = this.caller.promptCache ? affinityOf(this.caller.promptCache) : null;
    return this.handle;
  }

  /** The options of the upstream call of the try in flight: the request's abort, the try's span. */
  get tryOptions(): CallOptions {
    return { abort: this.abort, trace: this.trySpan };
  }

  /** The model whose prices bill the answer: the answering try's (a fallback's differs), else the requested one. */
  get answered(): ModelConfig {
    return this.answeredTry?.model ?? this.model;
  }

  /** The prices the answer is billed at: the answering model's, as the caller pays (list or batch prices). */
  get pricing(): Pricing {
    return this.caller.billing.pricing(this.answered);
  }

  get clientGone(): boolean {
    return this.abort.aborted;
  }

  /** The operation billed (names the tries' spans). */
  get operation(): string {
    return this.meter.operation;
  }

  /** Each try as the router makes it: the usage record names the deployment that answered or was tried last. */
  routed(t: RouteTry, span: Span | null): void {
    this.meter.routed(t);
    if (span) {
      this.trySpan = span;
      this.tryStarted = performance.now();
    }
  }

  /** The router hands over the span of the try that answered a stream (see runStream). */
  holdTry(span: Span, t: RouteTry): boolean {
    if (!this.holding || !tracer) return false;
    this.held = tracer.holdTry(span, t.deployment.upstreamModel, this.tryStarted);
    return true;
  }

  /** As run, for a call that returns a stream the caller reads: the try's span lasts until the request settles. */
  runStream<T>(attempt: (t: RouteTry) => Promise<T>): Promise<T> {
    this.holding = true;
    return this.run(attempt);
  }

  /**
   * As run, handing each try the adapter `upstream` picks for its deployment (src/modelCall/upstreams.ts): the
   * operation never looks an adapter up itself.
   */
  attempt<A, T>(
    upstream: Upstream<A>,
    attempt: (adapter: A, t: RouteTry) => Promise<T>,
    sameModel = false,
  ): Promise<T> {
    return this.run((t) => attempt(upstream(this.registry, t), t), sameModel);
  }

  /** As attempt, for a call that returns a stream the caller reads (see runStream). */
  attemptStream<A, T>(upstream: Upstream<A>, attempt: (adapter: A, t: RouteTry) => Promise<T>): Promise<T> {
    this.holding = true;
    return this.attempt(upstream, attempt);
  }

  private get registry(): ProviderRegistry {
    if (!this.providers) throw new Error('this call was opened without the provider registry');
    return this.providers;
  }

  /**
   * Tries `attempt` on the model's deployments and fallbacks until one answers (src/modelCall/modelRouter.ts): it
   * must throw only before the client has received anything. When none answers, the reservation is cancelled and
   * the last error thrown (a ClientClosed if the client left).
   */
  async run<T>(attempt: (t: RouteTry) => Promise<T>, sameModel = false): Promise<T> {
    try {
      return await this.router.run(
        this.model,
        (t) => {
          this.answeredTry = t;
          return attempt(t);
        },
        this,
        sameModel,
      );
    } catch (e) {
      this.cancel(failureStatus(e), this.unitsIfUnanswered);
      throw e;
    }
  }

  /** A stream the upstream broke off after its first byte: not retried (the client has it), its deployment cools. */
  streamCut(): void {
    if (this.answeredTry && !this.clientGone) this.router.streamCut(this.answeredTry);
  }

  /**
   * The request's one settlement: the usage at the answering model's prices (or `cost` for operations priced
   * otherwise), charged once; later calls are no-ops. `status` records how the answer ended: 200, 499 when the
   * client left, 502 when the upstream cut it short. Returns the VND charged.
   */
  settle(usage: TokenUsage, status = 200): number {
    if (this.meter.done) return 0;
    if (this.ticket) this.finishLimits(usageUnits(usage));
    const charged = this.meter.settleTokens(this.pricing, usage, status);
    if (this.traceSpan || this.held) this.traced(status, usage);
    return charged;
  }

  /**
   * Settles an operation not billed in tokens (images, audio): `costVnd` for `units`, recorded at `pricing` (the
   * answering model's, or a response cache hit's own price: src/cache/).
   */
  settleCost(costVnd: number, units: Record<string, number>, status = 200, pricing: Pricing = this.pricing): number {
    if (this.meter.done) return 0;
    this.finishLimits(units);
    const charged = this.meter.settle(costVnd, units, pricing, status);
    if (this.traceSpan || this.held) this.traced(status, null);
    return charged;
  }

  /** Charges nothing (no upstream answered, or the request failed before one could); later calls are no-ops. */
  cancel(status: number, units: Record<string, number> = {}): void {
    if (this.meter.done) return;
    this.finishLimits({});
    this.meter.cancel(units, status);
    if (this.traceSpan || this.held) this.traced(status, null);
  }

  /** What the request cost, as the SSE comment that ends a stream (its headers left before the bill was known). */
  costComment(): string {
    return costComment(this.meter);
  }

  /** The cost headers of a response not yet sent. `vnd`: an amount announced before it is charged (speech). */
  setCostHeaders(vnd = this.meter.charged): void {
    const out = this.caller.out;
    out.setHeader(COST_HEADER, String(vnd));
    out.setHeader(USAGE_ID_HEADER, this.meter.id);
  }

  /** The settlement under the request's span (a cancelled one too: cost 0), and the end of a held try's span. */
  private traced(status: number, usage: TokenUsage | null): void {
    this.held?.end(usage, status);
    this.held = null;
    if (!this.traceSpan || !tracer || this.caller.sharedSpan) return;
    const m = this.meter;
    tracer.settled(this.traceSpan, {
      operation: m.operation,
      model: m.model,
      costVnd: m.charged,
      status,
      deployment: m.deployment,
      usage,
    });
  }

  /** The key's token window corrected to what the request used (tokens of `units`). */
  private finishLimits(units: Record<string, number>): void {
    if (this.ticket) this.limiter!.settle(this.ticket, unitTokens(units));
  }
}

/**
 * Admits the request against its key's rate limits (429, nothing reserved), reserves its maximum cost (402 when
 * the account, or the key's budget, cannot cover it) and registers the call on the caller, so that whoever ends the
 * request cancels it if anything throws before it settles. The estimate's `maxTokens` is the request's input +
 * output token bound (absent for operations not billed in tokens); the key's token window is corrected to the
 * actual tokens at settlement. A caller whose hold covers the request (a batch's, a background response's) is
 * neither admitted nor reserved for: the call settles into the hold (src/operations/caller.ts Billing).
 */
export async function openCall(
  caller: Caller,
  deps: Pick<OperationDeps, 'router'> & { providers?: ProviderRegistry },
  model: ModelConfig,
  operation: string,
  estimate: Estimate,
): Promise<RoutedCall> {
  const maxCostVnd = estimate.maxCost;
  const maxTokens = estimate.maxTokens ?? 0;
  const billing: Billing = caller.billing;
  if (billing.kind === 'hold') {
    const p = caller.principal;
    const owner = { accountId: p.accountId, keyId: p.keyId };
    const meter = new Meter(billing.hold, owner, model.id, billing.operation ?? operation);
    return (caller.call = new RoutedCall(caller, deps.router, deps.providers, model, meter, null, null));
  }
  // Awaited only when there is something to wait for (a stale key to read again, a window to count in): most
  // requests have neither, and each await is a promise and a turn of the microtask queue.
  const p = billing.keys.isStale(caller.principal) ? await currentPrincipal(caller, billing) : caller.principal;
  const ticket = hasRateLimits(p, model.id) ? await admitRequest(caller, billing, maxTokens, model.id) : null;
  let meter: Meter;
  try {
    meter = await openMeter(
      billing.credit,
      {
        accountId: p.accountId,
        keyId: p.keyId,
        budgetKeyId: hasBudget(p.limits) || p.spendLimited ? p.keyId : null,
        budgetFenceAt: p.budgetFenceAt,
      },
      model.id,
      operation,
      maxCostVnd,
    );
  } catch (e) {
    if (ticket) billing.limiter.settle(ticket, 0); // refused for money: no tokens used
    if ((e as { code?: unknown } | null)?.code === 'budget_exceeded')
      billing.metrics.limitRefusals.inc({ limit: 'budget' });
    throw e;
  }
  return (caller.call = new RoutedCall(caller, deps.router, deps.providers, model, meter, ticket, billing.limiter));
}

/**
 * Admits and reserves for a request whose call runs later, elsewhere (a background response's: its workflow runs it
 * on a hold): the key's settings read again when stale (401 when revoked), its rate limits counted at the
 * estimate's tokens and left there (whoever runs it later cannot correct them: 429), then `place` reserves the
 * estimate's cost its own way (the hold, with the response's row), refused in the API's shape (402).
 */
export async function reserveAhead<T>(
  caller: Caller & { billing: AccountBilling },
  model: ModelConfig,
  estimate: Estimate,
  place: (maxCostVnd: number) => Promise<T>,
): Promise<T> {
  const billing = caller.billing;
  await currentPrincipal(caller, billing);
  await admitRequest(caller, billing, estimate.maxTokens ?? 0, model.id);
  try {
    return await reserveOrRefuse(estimate.maxCost, () => place(estimate.maxCost));
  } catch (e) {
    if ((e as { code?: unknown } | null)?.code === 'budget_exceeded')
      billing.metrics.limitRefusals.inc({ limit: 'budget' });
    throw e;
  }
}

/**
 * The request's key settings, read again when older than KEY_CACHE_MS (a request that spent long before reserving,
 * e.g. uploading): whether the key may reserve from its account's shared lease is decided on settings no older
 * than that, which is what lets the ledger's budget fence (migration 074) count every such lease.
 */
async function currentPrincipal(caller: Caller, billing: Pick<AccountBilling, 'keys'>): Promise<Principal> {
  const p = caller.principal;
  if (!billing.keys.isStale(p)) return p;
  const fresh = await billing.keys.refresh(p);
  if (!fresh) throw new ApiError(401, 'This API key was revoked.', 'invalid_request_error', null, 'invalid_api_key');
  caller.principal = fresh;
  return fresh;
}

/*
 * Every billed response says what it cost, so a client can reconcile request by request: the VND charged and the
 * usage record's id (GET /v1/usage), as response headers, or for a stream (whose headers left before the bill was
 * known) as an SSE comment just before its end. Comments are ignored by SSE clients, the official SDKs included.
 */

export const COST_HEADER = 'x-gateway-cost-vnd';
export const USAGE_ID_HEADER = 'x-gateway-usage-id';

/** `: x-gateway-cost-vnd=123 x-gateway-usage-id=<uuid>` and the blank line ending the comment. */
function costComment(meter: Meter): string {
  return sseComment(`${COST_HEADER}=${meter.charged} ${USAGE_ID_HEADER}=${meter.id}`);
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
