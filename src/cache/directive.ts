import { ApiError } from '../errors';

/**
 * The request's own say over the cache, in the `x-gateway-cache` header:
 *   ttl=SECONDS   use the cache for this request (even if the account has not turned it on), entries kept SECONDS
 *   no-store      neither read nor write the cache for this request
 *   refresh       skip the lookup, call the upstream and store its answer (with ttl=, for that long)
 * Anything else, or a TTL out of 1..maxTtlSeconds, is a 400 naming the header (nothing is called or charged).
 */

export const CACHE_HEADER = 'x-gateway-cache';

export interface CacheDirective {
  /** The client asked for the cache (ttl= or refresh): requests with tools are cached only then. */
  readonly asked: boolean;
  readonly noStore: boolean;
  readonly refresh: boolean;
  /** Seconds the entry is kept, when the request says. */
  readonly ttlSeconds: number | null;
}

export const NO_DIRECTIVE: CacheDirective = Object.freeze({
  asked: false,
  noStore: false,
  refresh: false,
  ttlSeconds: null,
});

function invalid(detail: string): ApiError {
  return new ApiError(
    400,
    `${CACHE_HEADER}: ${detail} (expected "ttl=SECONDS", "no-store" or "refresh").`,
    'invalid_request_error',
    CACHE_HEADER,
    'invalid_header',
  );
}

export function parseDirective(value: string | undefined | null, maxTtlSeconds: number): CacheDirective {
  if (value === undefined || value === null || value === '') return NO_DIRECTIVE;
  let noStore = false;
  let refresh = false;
  let ttlSeconds: number | null = null;
  for (const raw of value.split(',')) {
    const part = raw.trim().toLowerCase();
    if (part === 'no-store') noStore = true;
    else if (part === 'refresh') refresh = true;
    else if (part.startsWith('ttl=')) {
      const text = part.slice(4);
      const n = Number(text);
      if (!/^\d{1,10}$/.test(text) || n < 1 || n > maxTtlSeconds)
        throw invalid(`ttl must be a whole number of seconds from 1 to ${maxTtlSeconds}, got "${text.slice(0, 20)}"`);
      if (ttlSeconds !== null) throw invalid('ttl is given twice');
      ttlSeconds = n;
    } else throw invalid(`"${part.slice(0, 40)}" is not a cache directive`);
  }
  if (noStore && (refresh || ttlSeconds !== null)) throw invalid('no-store cannot be combined with other directives');
  return { asked: refresh || ttlSeconds !== null, noStore, refresh, ttlSeconds };
}
