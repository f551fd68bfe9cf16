/**
 * Why an upstream try failed, as the retry loop and the metrics see it. The provider adapters mark the errors they
 * raise (markFailure); anything unmarked is not an upstream failure (our own bug, a validation error) and is never
 * retried.
 */
export type FailureClass =
  'connect' | 'timeout' | 'rate_limit' | 'server' | 'conflict' | 'auth' | 'client' | 'stream_cut';
export const FAILURE_CLASSES: FailureClass[] = [
  'connect',
  'timeout',
  'rate_limit',
  'server',
  'conflict',
  'auth',
  'client',
  'stream_cut',
];

interface Failure {
  cls: FailureClass;
  retryAfterMs: number | null;
}
const failures = new WeakMap<object, Failure>();

/**
 * The class of an upstream HTTP status: 408 timeout, 409 conflict, 429 rate limit, 5xx server; 401, 403 and 407
 * auth (the upstream refused the deployment's own credentials); other 4xx client.
 */
export function classOfStatus(status: number): FailureClass {
  if (status === 408) return 'timeout';
  if (status === 401 || status === 403 || status === 407) return 'auth';
  if (status === 409) return 'conflict';
  if (status === 429) return 'rate_limit';
  return status >= 500 ? 'server' : 'client';
}

/** Retry-After (delta seconds or an HTTP date) in ms from now; null if absent or unreadable. */
export function parseRetryAfter(v: string | undefined | null, now = Date.now()): number | null {
  if (!v) return null;
  const s = Number(v.trim());
  if (Number.isFinite(s)) return s >= 0 ? Math.ceil(s * 1000) : null;
  const t = Date.parse(v);
  return Number.isNaN(t) ? null : Math.max(0, t - now);
}

/** Marks an error raised for a failed upstream call; returns it. */
export function markFailure<E extends object>(err: E, cls: FailureClass, retryAfter?: string | null): E {
  failures.set(err, { cls, retryAfterMs: parseRetryAfter(retryAfter) });
  return err;
}

export function failureOf(err: unknown): Failure | null {
  return err && typeof err === 'object' ? (failures.get(err) ?? null) : null;
}

/**
 * Whether another deployment may be tried: not for a 4xx other than 408, 409 and 429, 401/403 included
 * (docs/routing.md: the client gets a 502 at once), nor for a stream cut after its first byte (the client already
 * has part of it).
 */
export function isRetryable(cls: FailureClass): boolean {
  return cls !== 'client' && cls !== 'auth' && cls !== 'stream_cut';
}

/**
 * Whether the deployment is cooled down for it: provider trouble, not a conflict about this one request. A refused
 * key (auth) is not retried for the request that met it, but it would fail every later request too (a revoked or
 * mistyped deployment key), so the deployment is left out while its siblings serve, and probed again after the
 * backoff (as LiteLLM cools deployments on 401).
 */
export function coolsDown(cls: FailureClass): boolean {
  return (
    cls === 'connect' ||
    cls === 'timeout' ||
    cls === 'rate_limit' ||
    cls === 'server' ||
    cls === 'auth' ||
    cls === 'stream_cut'
  );
}

/** Gives `to` (an error rewritten from `from`) the same failure class, so the retry loop still sees it. */
export function carryFailure<E extends object>(from: unknown, to: E): E {
  const f = failureOf(from);
  if (f) failures.set(to, f);
  return to;
}
