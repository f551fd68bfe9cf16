import fs from 'node:fs';
import { FormData, Pool } from 'undici';
import type { Dispatcher } from 'undici';
import { ApiError } from '../../errors';
import { classOfStatus, markFailure } from '../failure';
import type { ProviderConfig, ProviderKind } from '../../catalog';
import {
  postForWholeAnswer,
  postStreamingTo,
  upstreamPool,
  type UpstreamPost,
  type WholeAnswer,
} from '../upstreamDispatch';
import type {
  BufferedResponse,
  CallOptions,
  MultipartValue,
  OpenAICompatibleAdapter,
  StreamingResponse,
  TokenUsage,
} from '../types';
import type { StreamSink } from '../../sse';
import { clip, MAX_UPSTREAM_ECHO } from '../../text';
import { withTraceparent } from '../../observability';
import { MAX_ERROR_BODY, readErrorBody } from '../upstreamError';

/**
 * Adapter for any OpenAI-compatible upstream (OpenAI, vLLM, Ollama, LiteLLM, the emulator): base URL + bearer
 * key, one keep-alive undici Pool per upstream origin, connect/headers/body timeouts, and upstream errors mapped
 * to our ApiError (upstream 4xx passes its status and message through in the OpenAI shape; upstream 5xx,
 * transport failures and timeouts become 502/504 `upstream_error`).
 */

export interface OpenAIAdapterOptions {
  /** Max sockets to the upstream origin. */
  connections?: number;
  connectTimeoutMs?: number;
  /** Called for every failed upstream call (metrics). */
  onError?: (providerId: string, status: number) => void;
}

/** How a variant of the protocol (Azure OpenAI) differs: its URLs, its credentials, its error shapes. */
export interface OpenAIWiring {
  /** A pool shared with the other adapters of the same upstream origin (its owner closes it). */
  pool?: Pool;
  /** The upstream path of an operation such as `/chat/completions` (default: the base URL's path, then it). */
  pathOf?: (path: string) => string;
  /** Auth headers fetched before each request (tokens that expire); default: the provider's key as a bearer token. */
  credentials?: { headers(): Promise<Record<string, string>> };
  /** A non-2xx answer as our error (default mapUpstreamError). */
  mapError?: (status: number, text: string, retryAfter: string) => ApiError;
  /** What a relayed stream passes through on its way to the client's sink (events the protocol variant adds). */
  relaySink?: (sink: StreamSink) => StreamSink;
}

export class OpenAIAdapter implements OpenAICompatibleAdapter {
  readonly kind: ProviderKind;
  readonly id: string;
  private readonly pool: Pool;
  private readonly basePath: string;
  private readonly timeoutMs: number;
  // Built once (again only when a credential changes): undici does not mutate request header objects.
  private jsonHeaders: Record<string, string>;
  private authHeaders: Record<string, string>;

  constructor(
    cfg: ProviderConfig,
    private readonly opts: OpenAIAdapterOptions = {},
    private readonly wiring: OpenAIWiring = {},
  ) {
    this.id = cfg.id;
    this.kind = cfg.kind;
    const url = new URL(cfg.baseUrl);
    this.basePath = url.pathname.replace(/\/+$/, '');
    this.timeoutMs = cfg.timeoutMs ?? 120_000;
    this.authHeaders = cfg.apiKey && !wiring.credentials ? { authorization: `Bearer ${cfg.apiKey}` } : {};
    this.jsonHeaders = { ...this.authHeaders, ...JSON_HEADERS };
    this.pool = wiring.pool ?? upstreamPool(url.origin, this.timeoutMs, opts);
  }

  /** Fetches the credentials of the next request when they can change (a token that expires). */
  private async authorize(): Promise<void> {
    const h = await this.wiring.credentials!.headers();
    if (h === this.authHeaders) return;
    this.authHeaders = h;
    this.jsonHeaders = { ...h, ...JSON_HEADERS };
  }

  private pathOf(path: string): string {
    return this.wiring.pathOf ? this.wiring.pathOf(path) : this.basePath + path;
  }

  async postJson(path: string, payload: string, opts: CallOptions = {}): Promise<BufferedResponse> {
    if (this.wiring.credentials) await this.authorize();
    const a = await this.dispatched(opts, () => postForWholeAnswer(this.pool, this.jsonPost(path, payload, opts)));
    if (a.status < 200 || a.status >= 300) throw this.refused(a);
    return { status: a.status, contentType: header(a.headers, 'content-type'), body: a.body };
  }

  async postStream(path: string, payload: string, opts: CallOptions = {}): Promise<StreamingResponse> {
    if (this.wiring.credentials) await this.authorize();
    const res = await this.send(path, this.jsonHeaders, payload, opts);
    return { status: res.statusCode, contentType: header(res.headers, 'content-type'), body: res.body };
  }

  /**
   * POST JSON and stream a 2xx answer into `sink` as it arrives (the SSE relay of chat/completions); resolves once the
   * sink has had its end or failure. A non-2xx answer or a failure before any answer throws, the sink untouched.
   */
  async streamTo(path: string, payload: string, sink: StreamSink, opts: CallOptions = {}): Promise<void> {
    if (this.wiring.credentials) await this.authorize();
    const to = this.wiring.relaySink ? this.wiring.relaySink(sink) : sink;
    const a = await this.dispatched(opts, () => postStreamingTo(this.pool, this.jsonPost(path, payload, opts), to));
    if (a) throw this.refused(a);
  }

  private jsonPost(path: string, payload: string, opts: CallOptions): UpstreamPost {
    return {
      path: this.pathOf(path),
      headers: this.jsonHeaders,
      body: payload,
      abort: opts.abort,
      trace: opts.trace,
      errorBodyLimit: MAX_ERROR_BODY,
    };
  }

  /** A dispatched call whose transport failures are mapped as every other call's. */
  private async dispatched<T>(opts: CallOptions, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (e) {
      throw this.transportError(e, opts);
    }
  }

  /** A non-2xx upstream answer as our error (counted for metrics). */
  private refused(a: WholeAnswer): ApiError {
    this.opts.onError?.(this.id, a.status);
    return (this.wiring.mapError ?? mapUpstreamError)(
      a.status,
      a.body.toString('utf8'),
      header(a.headers, 'retry-after'),
    );
  }

  /** POST /chat/completions, whole JSON answer (for callers that translate other interfaces onto chat). */
  chat(payload: string, opts?: CallOptions): Promise<BufferedResponse> {
    return this.postJson('/chat/completions', payload, opts);
  }

  /** POST /chat/completions with `stream: true` in the payload: the SSE body as it arrives. */
  chatStream(payload: string, opts?: CallOptions): Promise<StreamingResponse> {
    return this.postStream('/chat/completions', payload, opts);
  }

  async postMultipart(
    path: string,
    fields: Record<string, MultipartValue>,
    opts: CallOptions = {},
  ): Promise<BufferedResponse> {
    if (this.wiring.credentials) await this.authorize();
    const form = new FormData();
    for (const [name, v] of Object.entries(fields)) {
      if (typeof v === 'string') form.append(name, v);
      // openAsBlob streams the file while sending: an upload is never held in memory whole.
      else
        form.append(
          name,
          await fs.openAsBlob(v.path, { type: v.contentType ?? 'application/octet-stream' }),
          v.filename,
        );
    }
    const res = await this.send(path, this.authHeaders, form, opts);
    return {
      status: res.statusCode,
      contentType: header(res.headers, 'content-type'),
      body: await this.readBody(res, opts),
    };
  }

  close(): Promise<void> {
    return this.wiring.pool ? Promise.resolve() : this.pool.close();
  }

  /** One upstream request; resolves with a 2xx response (body unread), throws a mapped ApiError otherwise. */
  private async send(
    path: string,
    headers: Record<string, string>,
    body: string | FormData,
    opts: CallOptions,
  ): Promise<Dispatcher.ResponseData> {
    let res: Dispatcher.ResponseData;
    try {
      res = await this.pool.request({
        method: 'POST',
        path: this.pathOf(path),
        headers: withTraceparent(headers, opts.trace),
        body,
        signal: opts.abort?.signal,
      });
    } catch (e) {
      throw this.transportError(e, opts);
    }
    if (res.statusCode >= 200 && res.statusCode < 300) return res;
    let text = '';
    try {
      text = await readErrorBody(res.body);
    } catch (e) {
      throw this.transportError(e, opts);
    }
    this.opts.onError?.(this.id, res.statusCode);
    throw (this.wiring.mapError ?? mapUpstreamError)(res.statusCode, text, header(res.headers, 'retry-after'));
  }

  private async readBody(res: Dispatcher.ResponseData, opts: CallOptions): Promise<Buffer> {
    try {
      return Buffer.from(await res.body.arrayBuffer());
    } catch (e) {
      throw this.transportError(e, opts);
    }
  }

  private transportError(e: unknown, opts: CallOptions): Error {
    if (e instanceof ApiError) return e;
    if (opts.abort?.reason) return opts.abort.reason;
    const err = mapTransportError(e);
    this.opts.onError?.(this.id, err.status);
    return err;
  }
}

const JSON_HEADERS = { 'content-type': 'application/json', accept: 'application/json' };

function header(h: Dispatcher.ResponseData['headers'], name: string): string {
  const v = h[name];
  return Array.isArray(v) ? (v[0] ?? '') : (v ?? '');
}

interface UpstreamErrorBody {
  error?: { message?: unknown; type?: unknown; param?: unknown; code?: unknown } | string;
  message?: unknown;
  detail?: unknown;
}

/**
 * Upstream HTTP error -> our error. 4xx: the client's request was refused upstream, so its status and message
 * pass through (OpenAI shape), except 401/403 and 407, which concern the gateway's own upstream credentials and
 * would mislead the client: those become 502. 5xx: 502 `upstream_error` (504 for an upstream 504).
 */
export function mapUpstreamError(status: number, text: string, retryAfter = ''): ApiError {
  // Marked for the retry loop (src/modelCall): refused credentials (auth) are not retried but cool the deployment.
  return markFailure(upstreamError(status, text, retryAfter), classOfStatus(status), retryAfter);
}

function upstreamError(status: number, text: string, retryAfter: string): ApiError {
  let body: UpstreamErrorBody | null = null;
  try {
    body = JSON.parse(text) as UpstreamErrorBody;
  } catch {
    /* not JSON: use the text */
  }
  const e = body && typeof body.error === 'object' && body.error ? body.error : null;
  const str = (v: unknown) => (typeof v === 'string' && v ? v : null);
  // An upstream's message may quote the request (its content, a name): bounded like our own echoes, more loosely.
  const message = clip(
    str(e?.message) ??
      str(body?.error) ??
      str(body?.message) ??
      str(body?.detail) ??
      (text.trim().slice(0, 500) || `upstream answered HTTP ${status}`),
    MAX_UPSTREAM_ECHO,
  );
  if (status >= 400 && status < 500 && status !== 401 && status !== 403 && status !== 407) {
    const headers: Record<string, string> = retryAfter && status === 429 ? { 'retry-after': retryAfter } : {};
    return new ApiError(
      status,
      message,
      str(e?.type) ?? (status === 429 ? 'rate_limit_error' : 'invalid_request_error'),
      str(e?.param),
      str(e?.code) ?? (typeof e?.code === 'number' ? String(e.code) : null),
      headers,
    );
  }
  if (status === 401 || status === 403 || status === 407) {
    return new ApiError(
      502,
      `The upstream provider refused the gateway's credentials (HTTP ${status}).`,
      'upstream_error',
      null,
      'upstream_error',
    );
  }
  if (status === 504)
    return new ApiError(
      504,
      `The upstream provider timed out (HTTP 504): ${message}`,
      'upstream_error',
      null,
      'upstream_timeout',
    );
  return new ApiError(
    502,
    `The upstream provider failed (HTTP ${status}): ${message}`,
    'upstream_error',
    null,
    'upstream_error',
  );
}

/** Network-level failures: timeouts -> 504, everything else (refused, reset, bad response) -> 502. */
export function mapTransportError(e: unknown): ApiError {
  const code = (e as { code?: string })?.code ?? '';
  if (code === 'UND_ERR_CONNECT_TIMEOUT' || code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
    return markFailure(
      new ApiError(504, 'The upstream provider did not answer in time.', 'upstream_error', null, 'upstream_timeout'),
      'timeout',
    );
  }
  return markFailure(
    new ApiError(
      502,
      `The upstream provider could not be reached (${code || (e as Error)?.name || 'error'}).`,
      'upstream_error',
      null,
      'upstream_error',
    ),
    'connect',
  );
}

const USAGE_KEY = Buffer.from('"usage"');

/**
 * The `usage` object of an OpenAI-style JSON answer, read without parsing the whole body: OpenAI puts it last,
 * and inside string values a quote is always escaped, so the last `"usage"` followed by `:` is the top-level key.
 * Falls back to a full parse when the shortcut does not apply. Null when there is no usage object.
 */
export function usageFromJson(body: Buffer): TokenUsage | null {
  const at = body.lastIndexOf(USAGE_KEY);
  if (at >= 0) {
    let i = at + USAGE_KEY.length;
    while (i < body.length && (body[i] === 0x20 || body[i] === 0x0a || body[i] === 0x0d || body[i] === 0x09)) i++;
    if (body[i] === 0x3a /* : */) {
      i++;
      while (i < body.length && (body[i] === 0x20 || body[i] === 0x0a || body[i] === 0x0d || body[i] === 0x09)) i++;
      if (body[i] === 0x7b /* { */) {
        let depth = 0;
        for (let j = i; j < body.length; j++) {
          const c = body[j];
          if (c === 0x7b) depth++;
          else if (c === 0x7d && --depth === 0) {
            try {
              const u = JSON.parse(body.toString('utf8', i, j + 1));
              return u && typeof u === 'object' ? (u as TokenUsage) : null;
            } catch {
              break;
            }
          }
        }
      }
    }
  }
  try {
    const parsed = JSON.parse(body.toString('utf8')) as { usage?: unknown };
    return parsed && typeof parsed.usage === 'object' && parsed.usage ? (parsed.usage as TokenUsage) : null;
  } catch {
    return null;
  }
}
