import type { Pool } from 'undici';
import type { Dispatcher } from 'undici';
import { upstreamPool } from '../upstreamDispatch';
import { ApiError } from '../../errors';
import type { ProviderConfig } from '../../catalog';
import { mapTransportError } from '../openai/adapter';
import { readErrorBody, refusal } from '../upstreamError';
import type { CallOptions, ProviderAdapter } from '../types';
import type { MessagesUpstream } from '../messagesUpstream';
import { withTraceparent } from '../../observability';

/**
 * Native Anthropic Messages upstream (api.anthropic.com or any Anthropic-protocol server): x-api-key auth, the
 * client's anthropic-version (default 2023-06-01) and anthropic-beta forwarded, bodies passed through as the
 * client sent them (only `model` is rewritten by the router). One keep-alive undici Pool per upstream origin.
 *
 * Upstream errors are returned unmodified (Claude Code's retry logic matches on their wording): an
 * UpstreamHttpError (shape `anthropic`) carries the upstream status, body and retry headers. Only 401/403/407 (the
 * gateway's own upstream credentials) become a 502, so a client never thinks its own key was refused.
 */

export const DEFAULT_ANTHROPIC_VERSION = '2023-06-01';

export interface AnthropicHeaders {
  version?: string;
  beta?: string;
}

export interface AnthropicResponse {
  status: number;
  contentType: string;
  headers: Record<string, string>;
  body: Dispatcher.ResponseData['body'];
}

export class AnthropicAdapter implements ProviderAdapter, MessagesUpstream {
  readonly kind = 'anthropic' as const;
  readonly id: string;
  private readonly pool: Pool;
  private readonly basePath: string;
  private readonly apiKey: string | undefined;

  constructor(
    cfg: ProviderConfig,
    private readonly opts: { connections?: number; onError?: (providerId: string, status: number) => void } = {},
  ) {
    this.id = cfg.id;
    const url = new URL(cfg.baseUrl);
    this.basePath = url.pathname.replace(/\/+$/, '');
    this.apiKey = cfg.apiKey;
    const timeout = cfg.timeoutMs ?? 600_000;
    this.pool = upstreamPool(url.origin, timeout, opts);
  }

  messagesFor(): MessagesUpstream {
    return this;
  }

  /** POST /v1/messages; resolves once a 2xx status arrived, with the body (JSON or SSE) still streaming. */
  messages(payload: string, h: AnthropicHeaders, opts: CallOptions = {}): Promise<AnthropicResponse> {
    return this.post('/v1/messages', payload, h, opts);
  }

  /**
   * POST /v1/messages, whole answer: the body is read here, so a connection broken after the headers fails the call
   * like one broken before them (a routed try that may be retried, cooling its deployment), not a success.
   */
  async messagesWhole(
    payload: string,
    h: AnthropicHeaders,
    opts: CallOptions = {},
  ): Promise<AnthropicResponse & { raw: Buffer }> {
    const res = await this.post('/v1/messages', payload, h, opts);
    try {
      return { ...res, raw: Buffer.from(await res.body.arrayBuffer()) };
    } catch (e) {
      throw this.transportError(e, opts);
    }
  }

  /** POST /v1/messages/count_tokens. */
  countTokens(payload: string, h: AnthropicHeaders, opts: CallOptions = {}): Promise<AnthropicResponse> {
    return this.post('/v1/messages/count_tokens', payload, h, opts);
  }

  close(): Promise<void> {
    return this.pool.close();
  }

  private async post(
    path: string,
    payload: string,
    h: AnthropicHeaders,
    opts: CallOptions,
  ): Promise<AnthropicResponse> {
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'anthropic-version': h.version || DEFAULT_ANTHROPIC_VERSION,
    };
    if (h.beta) headers['anthropic-beta'] = h.beta;
    if (this.apiKey) headers['x-api-key'] = this.apiKey;
    let res: Dispatcher.ResponseData;
    try {
      res = await this.pool.request({
        method: 'POST',
        path: this.basePath + path,
        headers: withTraceparent(headers, opts.trace),
        body: payload,
        signal: opts.abort?.signal,
      });
    } catch (e) {
      throw this.transportError(e, opts);
    }
    const out = {
      status: res.statusCode,
      contentType: header(res.headers, 'content-type'),
      headers: passHeaders(res.headers),
      body: res.body,
    };
    if (res.statusCode >= 200 && res.statusCode < 300) return out;
    let text = '';
    try {
      text = await readErrorBody(res.body);
    } catch (e) {
      throw this.transportError(e, opts);
    }
    this.opts.onError?.(this.id, res.statusCode);
    throw refusal('anthropic', res.statusCode, text, out.headers);
  }

  private transportError(e: unknown, opts: CallOptions): Error {
    if (e instanceof ApiError) return e;
    if (opts.abort?.reason) return opts.abort.reason;
    const err = mapTransportError(e);
    this.opts.onError?.(this.id, err.status);
    return err;
  }
}

function header(h: Dispatcher.ResponseData['headers'], name: string): string {
  const v = h[name];
  return Array.isArray(v) ? (v[0] ?? '') : (v ?? '');
}

/** Upstream response headers worth passing to the client (request id, rate limits, retry hints). */
function passHeaders(h: Dispatcher.ResponseData['headers']): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(h)) {
    if (v === undefined) continue;
    if (k === 'retry-after' || k === 'x-should-retry' || k.startsWith('anthropic-ratelimit-'))
      out[k] = Array.isArray(v) ? v.join(', ') : v;
    if (k === 'request-id') out['upstream-request-id'] = Array.isArray(v) ? v[0] : v;
  }
  return out;
}
