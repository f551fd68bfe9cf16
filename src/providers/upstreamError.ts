import type { Dispatcher } from 'undici';
import { ApiError } from '../errors';
import { carryFailure, classOfStatus, markFailure } from './failure';
import type { ProviderKind } from '../catalog';
import { clip, MAX_UPSTREAM_ECHO } from '../text';

/**
 * An upstream's non-2xx HTTP answer, shared by every provider kind whose native routes pass the upstream's own
 * error through (Anthropic, Gemini, and the cloud kinds speaking their protocols). It carries the status, the provider
 * kind, the body (bounded, as text and parsed) and the retry headers; `shape` says whose error format the body follows,
 * so a router renders it natively when the interfaces match and translates it otherwise (asOpenAIError).
 */

/** Bytes kept of an upstream's error body: its message is all that is passed on, the rest is read and dropped. */
export const MAX_ERROR_BODY = 64 * 1024;

/** Whose error format an upstream error body follows. */
export type ErrorShape = 'openai' | 'anthropic' | 'gemini';

export class UpstreamHttpError extends Error {
  /** The body parsed as JSON; null when it is not JSON. */
  readonly parsed: unknown;

  constructor(
    readonly kind: ProviderKind,
    readonly status: number,
    readonly body: string,
    readonly headers: Record<string, string>,
    readonly shape: ErrorShape = kind === 'anthropic' || kind === 'gemini' ? kind : 'openai',
  ) {
    super(`${kind} upstream answered HTTP ${status}`);
    let parsed: unknown = null;
    try {
      parsed = JSON.parse(body);
    } catch {
      /* not JSON: the text is all there is */
    }
    this.parsed = parsed;
  }

  /** The upstream's own message (`error.message`, `message` or a string `error`), when the body has one. */
  upstreamMessage(): string | null {
    const b = this.parsed as { error?: { message?: unknown } | unknown; message?: unknown } | null;
    if (!b || typeof b !== 'object') return null;
    const e = b.error as { message?: unknown } | null | undefined;
    if (e && typeof e === 'object' && typeof e.message === 'string') return e.message;
    if (typeof e === 'string' && e) return e;
    return typeof b.message === 'string' ? b.message : null;
  }
}

/** True for an UpstreamHttpError whose body follows `shape`. */
export function isUpstreamError(e: unknown, shape: ErrorShape): e is UpstreamHttpError {
  return e instanceof UpstreamHttpError && e.shape === shape;
}

/** Reads an (error) body to the end, keeping at most `limit` bytes: the connection stays reusable. */
export async function readLimited(body: Dispatcher.ResponseData['body'], limit: number): Promise<string> {
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const c of body) {
    const b = c as Buffer;
    if (n < limit) chunks.push(b);
    n += b.length;
  }
  return Buffer.concat(chunks).subarray(0, limit).toString('utf8');
}

/** An upstream's error body, bounded to MAX_ERROR_BODY. */
export function readErrorBody(body: Dispatcher.ResponseData['body']): Promise<string> {
  return readLimited(body, MAX_ERROR_BODY);
}

/** The upstream refused the gateway's own credentials: a 502, so a client never thinks its own key was refused. */
export function credentialsRefused(status: number): ApiError {
  return markFailure(
    new ApiError(
      502,
      `The upstream provider refused the gateway's credentials (HTTP ${status}).`,
      'api_error',
      null,
      'upstream_error',
    ),
    'auth',
  );
}

/**
 * The gateway could not obtain its own credentials (no AWS credentials in the chain, a Google token refused or
 * unreachable): a 502 naming none of it, cooling the deployment like a refused key.
 */
export function noCredentials(): ApiError {
  return markFailure(
    new ApiError(
      502,
      'The gateway could not authenticate to the upstream provider.',
      'api_error',
      null,
      'upstream_error',
    ),
    'auth',
  );
}

/**
 * The error to throw for a non-2xx answer whose body the routes pass through: credentials refused (401/403/407)
 * become credentialsRefused; anything else an UpstreamHttpError marked for the retry loop (src/modelCall).
 */
export function refusal(
  kind: ProviderKind,
  status: number,
  body: string,
  headers: Record<string, string>,
  shape?: ErrorShape,
): Error {
  if (status === 401 || status === 403 || status === 407) return credentialsRefused(status);
  return markFailure(
    new UpstreamHttpError(kind, status, body, headers, shape),
    classOfStatus(status),
    headers['retry-after'],
  );
}

/**
 * An upstream error in the OpenAI shape (what the chat-based paths render): a 5xx becomes a 502 `upstream_error`, a
 * 4xx keeps its status and the upstream's message (bounded). Anything else is returned as it is.
 */
export function asOpenAIError(e: unknown): unknown {
  if (!(e instanceof UpstreamHttpError)) return e;
  const said = e.upstreamMessage();
  const message = said !== null ? clip(said, MAX_UPSTREAM_ECHO) : `upstream answered HTTP ${e.status}`;
  if (e.status >= 500)
    return carryFailure(
      e,
      new ApiError(
        502,
        `The upstream provider failed (HTTP ${e.status}): ${message}`,
        'upstream_error',
        null,
        'upstream_error',
      ),
    );
  const retryAfter = e.headers['retry-after'];
  return carryFailure(
    e,
    new ApiError(
      e.status,
      message,
      e.status === 429 ? 'rate_limit_error' : 'invalid_request_error',
      null,
      null,
      retryAfter ? { 'retry-after': retryAfter } : {},
    ),
  );
}
