/**
 * Why an upstream try failed, as the retry loop and the metrics see it. The provider adapters mark the errors they
 * raise (markFailure); anything unmarked is not an upstream failure (our own bug, a validation error) and is never
 * retried.
 */
export type FailureClass = 'connect' | 'timeout' | 'rate_limit' | 'server' | 'conflict' | 'client' | 'stream_cut';
export const FAILURE_CLASSES: FailureClass[] = ['connect', 'timeout', 'rate_limit', 'server', 'conflict', 'client', 'stream_cut'];

interface Failure { cls: FailureClass; retryAfterMs: number | null }
const failures = new WeakMap<object, Failure>();

/** The class of an upstream HTTP status: 408 timeout, 409 conflict, 429 rate limit, 5xx server, other 4xx client. */
export function classOfStatus(status: number): FailureClass {
  if (status === 408) return 'timeout';
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
  return err && typeof err === 'object' ? failures.get(err) ?? null : null;
}

/** Whether another deployment may be tried: not for the client's own 4xx (other than 408, 409, 429). */
export function isRetryable(cls: FailureClass): boolean {
  return cls !== 'client' && cls !== 'stream_cut';
}

/** Whether the deployment is cooled down for it: provider trouble, not a conflict about this one request. */
export function coolsDown(cls: FailureClass): boolean {
  return cls === 'connect' || cls === 'timeout' || cls === 'rate_limit' || cls === 'server' || cls === 'stream_cut';
}

/** Gives `to` (an error rewritten from `from`) the same failure class, so the retry loop still sees it. */
export function carryFailure<E extends object>(from: unknown, to: E): E {
  const f = failureOf(from);
  if (f) failures.set(to, f);
  return to;
}
