import type { ServerResponse } from 'node:http';
import type { Span } from '@opentelemetry/api';
import type { Principal, KeyResolver } from '../auth';
import type { ModelConfig, Pricing } from '../catalog';
import type { Db } from '../db';
import type { RateLimiter } from '../limits';
import type { RequestAbort } from '../net';
import type { Logger, Metrics } from '../observability';
import type { SseSink } from '../sse';
import type { ModelCallDeps } from './index';
import type { AffinitySource } from './affinity';
import type { CreditManager } from './credit';
import type { Reservation } from './creditLease';
import type { RoutedCall } from './routedCall';
import type { OutputTap } from './outputTap';

/**
 * Who an operation runs for and where its answer goes, without HTTP. Every synchronous operation (chat, completions,
 * embeddings, messages, responses, the Gemini methods: src/operations/<name>/) is a function of (caller, deps,
 * model, body). The HTTP layer builds a Caller from the Koa context (src/api/httpCaller.ts); the batch executor
 * (src/jobs/batches/execute.ts) and background responses (src/jobs/backgroundResponses/headless.ts)
 * build their own. What differs between them is only here: the principal, the abort, the money (`billing`) and the
 * answer's sink (`out`).
 */

/**
 * What the operations read besides the caller: built once at start-up (AppDeps satisfies it). The response cache,
 * above the model call, reads its own field of the same deps (`CachingDeps`, src/cache/serve.ts): the model call
 * does not know the cache.
 */
export interface OperationDeps extends ModelCallDeps {
  db: Db;
  logger: Logger;
}

/**
 * How a request is paid for. `account`: the key's rate limits admit it and its maximum cost is reserved from the
 * account's credit (402 when it cannot be covered), charged at list prices. `hold`: a hold placed before covers it
 * (a batch's, a background response's): nothing is admitted or reserved per request; the bill the operation settles
 * is handed to `hold`, at `pricing` (the batch prices for a batch).
 */
export type Billing = AccountBilling | HoldBilling;

export interface AccountBilling {
  readonly kind: 'account';
  readonly credit: CreditManager;
  readonly limiter: RateLimiter;
  readonly metrics: Metrics;
  readonly keys: KeyResolver;
  pricing(model: ModelConfig): Pricing;
}

export interface HoldBilling {
  readonly kind: 'hold';
  readonly hold: Reservation;
  pricing(model: ModelConfig): Pricing;
  /** The operation the bill names instead of the operation's own (a batch's `batch.chat.completions`). */
  readonly operation?: string;
}

const listPrices = (m: ModelConfig): Pricing => m.pricing;

/** Pay-as-you-go requests: built once per app (src/api), shared by every request. */
export function accountBilling(deps: {
  credit: CreditManager;
  limiter: RateLimiter;
  metrics: Metrics;
  keys: KeyResolver;
}): AccountBilling {
  return {
    kind: 'account',
    credit: deps.credit,
    limiter: deps.limiter,
    metrics: deps.metrics,
    keys: deps.keys,
    pricing: listPrices,
  };
}

/** Requests a hold covers, billed at `pricing` (default: list prices), named `operation` if given. */
export function holdBilling(
  hold: Reservation,
  pricing: (m: ModelConfig) => Pricing = listPrices,
  operation?: string,
): HoldBilling {
  return operation ? { kind: 'hold', hold, pricing, operation } : { kind: 'hold', hold, pricing };
}

/** Where an operation's answer goes: a whole answer (status and body), or the events of a stream. */
export interface Output {
  /** A response header (rate limits, cost, a clamped cap); ignored once the answer has started. */
  setHeader(name: string, value: string): void;
  /** The whole answer, an object serialised as JSON (status 200). */
  json(body: unknown): void;
  /** The whole answer as the upstream's JSON bytes, sent as they are (status 200). */
  bytes(body: Buffer): void;
  /**
   * The whole answer as the upstream's bytes with its own status, content type (default application/json) and
   * headers (the Anthropic pass-through).
   */
  raw(body: Buffer, how?: { status?: number; type?: string; headers?: Record<string, string> }): void;
  /** The sink a streamed answer's events are written to (made when the stream starts). */
  sink(): SseSink;
  /**
   * The socket-level response a pass-through relay writes to directly (chat and legacy completions: the hot path);
   * `ended` is told how it ended (200, 499, 502).
   */
  relay(): RelayTarget;
  /** Copies what is written from now on to `tap` (./outputTap.ts); absent: nothing of it is cached. */
  tap?(tap: OutputTap): void;
}

/** A pass-through stream's target (see Output.relay). */
export interface RelayTarget {
  readonly res: ServerResponse;
  /** An upstream answered: the stream is written to `res` from now on (nothing else answers the request). */
  streaming(): void;
  /** The stream has ended with `status` (the request log's and metrics' status). */
  ended(status: number): void;
}

export interface Caller {
  /** The request's id (logs, the SSE sink's headers). */
  readonly requestId: string;
  /** The key the request runs for; refreshed by the operation when older than KEY_CACHE_MS (account billing). */
  principal: Principal;
  /** Aborted when whoever waits for the answer is gone (a client, a cancelled batch or background response). */
  readonly abort: RequestAbort;
  /** The span the upstream tries hang under (the request's, or an activity's), if traced. */
  readonly span: Span | null;
  /** `span` is shared by many requests (a batch chunk's activity): the tries hang under it, no settlement is on it. */
  readonly sharedSpan?: boolean;
  /** Whose rate-limit header names the answer carries (Anthropic's on /v1/messages). */
  readonly anthropicHeaders: boolean;
  readonly billing: Billing;
  readonly out: Output;
  /** The request's billed call, once opened: whoever ends the request cancels it if it is still open. */
  call?: RoutedCall;
  /** The key's rate-limit headers were set by its admission. */
  rateLimitHeaders?: boolean;
  /**
   * What says which prompt cache the request reads, set by its operation (src/modelCall/affinity.ts): requests
   * sharing one go to the same healthy deployment, so the provider's prompt cache keeps hitting.
   */
  promptCache?: AffinitySource | null;
  /** The request's `x-gateway-cache` header, if it sent one (src/cache/directive.ts). */
  readonly cacheDirective?: string;
}
