import type { AccountBilling, Caller } from './caller';
import { ApiError } from '../errors';
import type { Admission, RateLimits, TokenTicket, WindowState, WindowView } from '../limits';
import type { Principal } from '../auth';

/**
 * A key's requests/tokens per minute on the request path: the check (before any money is reserved or anything is
 * sent upstream), the rate-limit headers, and the 429 refusal. Headers as the interfaces send them: OpenAI's
 * `x-ratelimit-{limit,remaining,reset}-{requests,tokens}` (reset as a duration, e.g. `6m0s`), and on /v1/messages
 * Anthropic's `anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}` (reset as an RFC 3339 time).
 * Every response to an authenticated request of a key with an RPM or TPM carries them: from its admission where it
 * had one, else (GET routes, a request refused before its check) from a read-only look at the window
 * (addRateLimitHeaders in src/api/route.ts). A key without either limit gets none: there is no limit to describe.
 */

/** OpenAI's duration form: `20ms`, `1.5s`, `6m0s`. */
export function openAIDuration(ms: number): string {
  const t = Math.max(0, Math.ceil(ms));
  if (t < 1000) return `${t}ms`;
  const m = Math.floor(t / 60_000);
  const s = Math.round((t % 60_000) / 10) / 100;
  return m > 0 ? `${m}m${s}s` : `${s}s`;
}

const OPENAI_NAMES = {
  requests: ['x-ratelimit-limit-requests', 'x-ratelimit-remaining-requests', 'x-ratelimit-reset-requests'],
  tokens: ['x-ratelimit-limit-tokens', 'x-ratelimit-remaining-tokens', 'x-ratelimit-reset-tokens'],
} as const;
const ANTHROPIC_NAMES = {
  requests: [
    'anthropic-ratelimit-requests-limit',
    'anthropic-ratelimit-requests-remaining',
    'anthropic-ratelimit-requests-reset',
  ],
  tokens: [
    'anthropic-ratelimit-tokens-limit',
    'anthropic-ratelimit-tokens-remaining',
    'anthropic-ratelimit-tokens-reset',
  ],
} as const;

/**
 * The last reset values rendered: an admitted request's reset is mostly the whole window, and an RFC 3339 time
 * changes once a second, so most requests reuse the string (the headers are on every limited key's response).
 */
let lastDuration: [number, string] = [-1, ''];
let lastInstant: [number, string] = [-1, ''];
function durationText(ms: number): string {
  if (lastDuration[0] !== ms) lastDuration = [ms, openAIDuration(ms)];
  return lastDuration[1];
}
function instantText(resetMs: number): string {
  const s = Math.ceil((Date.now() + resetMs) / 1000);
  if (lastInstant[0] !== s) lastInstant = [s, new Date(s * 1000).toISOString().replace('.000Z', 'Z')];
  return lastInstant[1];
}

/** Where the headers go: the response's (src/api) or a caller's output. */
export interface HeaderTarget {
  setHeader(name: string, value: string): unknown;
}

/** The key's rate-limit headers for window `a`, in OpenAI's names or (`anthropic`) Anthropic's. */
export function setRateLimitHeaders(res: HeaderTarget, anthropic: boolean, a: WindowView): void {
  const put = (kind: 'requests' | 'tokens', w: WindowState | null) => {
    if (!w) return;
    const [limit, remaining, reset] = (anthropic ? ANTHROPIC_NAMES : OPENAI_NAMES)[kind];
    res.setHeader(limit, String(w.limit));
    res.setHeader(remaining, String(w.remaining));
    res.setHeader(reset, anthropic ? instantText(w.resetMs) : durationText(w.resetMs));
  };
  put('requests', a.requests);
  put('tokens', a.tokens);
}

/** Whether admitRequest has a window to count the request in (most keys have none: no promise to await then). */
export function hasRateLimits(p: Principal, model?: string): boolean {
  if (p.limits.rpm !== null || p.limits.tpm !== null) return true;
  const project = model !== undefined && p.projectId ? p.modelLimits?.[model] : undefined;
  return !!project && (project.rpm !== null || project.tpm !== null);
}

/**
 * Counts one request of up to `maxTokens` tokens against the caller's key and, when its project limits `model`
 * (OpenAI's project rate limits, migration 215), against the project's window for that model; throws 429
 * `rate_limit_exceeded` (with Retry-After) when a window is full. Returns the key's ticket to correct the tokens at
 * settlement, or null. A request refused by the project's window still counted in the key's (as a refused request
 * counts at OpenAI); its tokens are given back.
 */
export async function admitRequest(
  caller: Caller,
  deps: Pick<AccountBilling, 'limiter' | 'metrics'>,
  maxTokens: number,
  model?: string,
): Promise<TokenTicket | null> {
  const p = caller.principal;
  const { rpm, tpm } = p.limits;
  let ticket: TokenTicket | null = null;
  if (rpm !== null || tpm !== null) {
    const a = await deps.limiter.check(p.keyId, { rpm, tpm }, maxTokens);
    caller.rateLimitHeaders = true;
    setRateLimitHeaders(caller.out, caller.anthropicHeaders, a);
    if (!a.allowed) refuse(deps, a, { rpm, tpm }, maxTokens, 'this API key');
    ticket = a.ticket;
  }
  const project = model !== undefined && p.projectId ? p.modelLimits?.[model] : undefined;
  if (project && (project.rpm !== null || project.tpm !== null)) {
    const a = await deps.limiter.check(projectWindowId(p.projectId!, model!), project, maxTokens);
    if (!a.allowed) {
      if (ticket) deps.limiter.settle(ticket, 0);
      refuse(deps, a, project, maxTokens, `this project for model ${model}`);
    }
    // The project's window keeps the bound (no ticket to settle): a project limit errs on the safe side.
  }
  return ticket;
}

/** The limiter's window of a project's requests to one model (apart from every key's: keys are UUIDs). */
export const projectWindowId = (projectId: string, model: string) => `project:${projectId}:${model}`;

function refuse(
  deps: Pick<AccountBilling, 'metrics'>,
  a: Admission,
  { rpm, tpm }: RateLimits,
  maxTokens: number,
  on: string,
): never {
  deps.metrics.limitRefusals.inc({ limit: a.refused === 'requests' ? 'requests' : 'tokens' });
  const retrySeconds = Math.max(1, Math.ceil(a.retryAfterMs / 1000));
  const headers = { 'retry-after': String(retrySeconds), 'retry-after-ms': String(Math.ceil(a.retryAfterMs)) };
  if (a.refused === 'too_large') {
    // As OpenAI answers a request larger than the TPM itself: waiting does not help, so no Retry-After.
    throw new ApiError(
      429,
      `Request too large: this request may use up to ${maxTokens} tokens (input + max output), ` +
        `over the limit of ${on} of ${tpm} tokens per minute. Send fewer input tokens or a lower max_tokens.`,
      'tokens',
      null,
      'rate_limit_exceeded',
    );
  }
  const [what, limit, w] =
    a.refused === 'requests'
      ? ['requests per minute (RPM)', rpm, a.requests]
      : ['tokens per minute (TPM)', tpm, a.tokens];
  const used = w ? w.limit - w.remaining : limit;
  throw new ApiError(
    429,
    `Rate limit reached for ${what} on ${on}: ` +
      `Limit ${limit}, Used ${used}, Requested ${a.refused === 'requests' ? 1 : maxTokens}. ` +
      `Please try again in ${openAIDuration(a.retryAfterMs)}.`,
    a.refused === 'requests' ? 'requests' : 'tokens',
    null,
    'rate_limit_exceeded',
    headers,
  );
}

/** Tokens a settled request used, from its usage units (prompt + completion); 0 for units without tokens. */
export function unitTokens(units: Record<string, number>): number {
  return (units.prompt_tokens ?? 0) + (units.completion_tokens ?? 0);
}
