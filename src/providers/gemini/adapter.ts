import type { Pool } from 'undici';
import type { Dispatcher } from 'undici';
import { upstreamPool } from '../upstreamDispatch';
import { ApiError, invalidUpstreamResponse } from '../../errors';
import type { ProviderConfig } from '../../catalog';
import { mapTransportError } from '../openai/adapter';
import { readErrorBody, refusal } from '../upstreamError';
import type { CallOptions, ProviderAdapter } from '../types';
import { withTraceparent } from '../../observability';
import { readWholeAnswer } from '../wholeAnswer';

/**
 * Native Gemini API upstream (generativelanguage.googleapis.com/v1beta or any server speaking it): x-goog-api-key
 * auth, POST {base}/models/{model}:{method}. One keep-alive undici Pool per upstream origin. An upstream error
 * keeps its status and Google-shaped body (UpstreamHttpError, shape `gemini`); only 401/403/407 (the gateway's own
 * upstream credentials) become a 502, so a client never thinks its own key was refused.
 */

/** One embedContent request (https://ai.google.dev/api/embeddings#method:-models.embedcontent). */
export interface GeminiEmbedRequest {
  content: object;
  taskType?: string;
  title?: string;
  outputDimensionality?: number;
}

export interface GeminiResponse {
  status: number;
  body: Dispatcher.ResponseData['body'];
}

/**
 * An upstream answering the Gemini API's generate methods natively: the Gemini API (GeminiAdapter) and Gemini on
 * Vertex (VertexAdapter). Errors are UpstreamHttpError of shape `gemini`.
 */
export interface GeminiUpstream {
  /** POST models/{model}:{method}; resolves once a 2xx status arrived, with the body still streaming. */
  call(model: string, method: string, payload: string, opts?: CallOptions & { sse?: boolean }): Promise<GeminiResponse>;
  /** The same call with the whole body read. */
  callWhole(model: string, method: string, payload: string, opts?: CallOptions): Promise<Buffer>;
}

export class GeminiAdapter implements ProviderAdapter, GeminiUpstream {
  readonly kind = 'gemini' as const;
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

  geminiFor(): GeminiUpstream {
    return this;
  }

  /** POST models/{model}:{method}; resolves once a 2xx status arrived, with the body still streaming. */
  async call(
    model: string,
    method: string,
    payload: string,
    opts: CallOptions & { sse?: boolean } = {},
  ): Promise<GeminiResponse> {
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (this.apiKey) headers['x-goog-api-key'] = this.apiKey;
    const path = `${this.basePath}/models/${encodeURIComponent(model)}:${method}${opts.sse ? '?alt=sse' : ''}`;
    let res: Dispatcher.ResponseData;
    try {
      res = await this.pool.request({
        method: 'POST',
        path,
        headers: withTraceparent(headers, opts.trace),
        body: payload,
        signal: opts.abort?.signal,
      });
    } catch (e) {
      throw this.transportError(e, opts);
    }
    if (res.statusCode >= 200 && res.statusCode < 300) return { status: res.statusCode, body: res.body };
    let text = '';
    try {
      text = await readErrorBody(res.body);
    } catch (e) {
      throw this.transportError(e, opts);
    }
    this.opts.onError?.(this.id, res.statusCode);
    const retryAfter = res.headers['retry-after'];
    const ra = Array.isArray(retryAfter) ? retryAfter[0] : retryAfter;
    throw refusal('gemini', res.statusCode, text, ra ? { 'retry-after': ra } : {});
  }

  /** The same call with the whole body read (a reset after the headers fails the try, like one before them). */
  async callWhole(model: string, method: string, payload: string, opts: CallOptions = {}): Promise<Buffer> {
    const res = await this.call(model, method, payload, opts);
    return readWholeAnswer(res, payload, opts, (e) => this.transportError(e, opts));
  }

  /**
   * embedContent (`batch` false, one request) or batchEmbedContents: the vectors in request order. Google's embed
   * API reports no usage, so only the vectors come back.
   */
  async embed(
    model: string,
    requests: GeminiEmbedRequest[],
    batch: boolean,
    opts: CallOptions = {},
  ): Promise<number[][]> {
    const payload = batch
      ? JSON.stringify({ requests: requests.map((r) => ({ ...r, model: `models/${model}` })) })
      : JSON.stringify(requests[0]);
    const raw = await this.callWhole(model, batch ? 'batchEmbedContents' : 'embedContent', payload, opts);
    try {
      const b = JSON.parse(raw.toString('utf8')) as {
        embedding?: { values: number[] };
        embeddings?: { values: number[] }[];
      };
      const values = batch ? b.embeddings!.map((e) => e.values) : [b.embedding!.values];
      if (values.length === requests.length && values.every((v) => Array.isArray(v))) return values;
    } catch {}
    throw invalidUpstreamResponse();
  }

  close(): Promise<void> {
    return this.pool.close();
  }

  private transportError(e: unknown, opts: CallOptions): Error {
    if (e instanceof ApiError) return e;
    if (opts.abort?.reason) return opts.abort.reason;
    const err = mapTransportError(e);
    this.opts.onError?.(this.id, err.status);
    return err;
  }
}
