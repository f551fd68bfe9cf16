import { Agent, Pool, request, type Dispatcher } from 'undici';
import { isRetryableStatus, VideoProviderError, type Download } from './types';
import { classOfStatus, markFailure } from '../failure';
import { withTraceparent } from '../../observability';

/** Video calls run in activities: the traceparent is the activity's span, from the worker's async context. */
const withTrace = (h: Record<string, string>) => withTraceparent(h);

/**
 * HTTP plumbing shared by the video adapters: a keep-alive pool to the provider's API origin, JSON calls with
 * timeouts and provider errors mapped to VideoProviderError, and streamed downloads that follow redirects.
 */

const MAX_ERROR_BODY = 16 * 1024;
const MAX_JSON_BODY = 64 * 1024 * 1024; // a Veo operation may carry the video inline (base64)
const MAX_REDIRECTS = 5;

export class ProviderHttp {
  readonly origin: string;
  readonly basePath: string;
  private readonly pool: Pool;
  // Result URLs live on other hosts (signed object-storage URLs): one shared agent for those.
  private readonly agent: Agent;

  constructor(
    baseUrl: string,
    private readonly timeoutMs: number,
    private readonly label: string,
  ) {
    const u = new URL(baseUrl);
    this.origin = u.origin;
    this.basePath = u.pathname.replace(/\/+$/, '');
    this.pool = new Pool(this.origin, {
      connections: 64,
      keepAliveTimeout: 30_000,
      connect: { timeout: 10_000 },
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    this.agent = new Agent({
      connections: 16,
      keepAliveTimeout: 30_000,
      connect: { timeout: 10_000 },
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
  }

  /** Calls `{base}{path}` (or an absolute URL on the same origin) and parses the JSON answer. */
  async json<T>(
    method: 'GET' | 'POST' | 'DELETE',
    path: string,
    headers: Record<string, string>,
    body?: unknown,
    signal?: AbortSignal,
  ): Promise<T> {
    let res: Dispatcher.ResponseData;
    try {
      res = await this.pool.request({
        method,
        path: this.basePath + path,
        signal,
        headers: withTrace({
          accept: 'application/json',
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
          ...headers,
        }),
        body: body === undefined ? undefined : JSON.stringify(body),
        headersTimeout: this.timeoutMs,
        bodyTimeout: this.timeoutMs,
      });
    } catch (e) {
      throw transportError(this.label, e);
    }
    const text = await readText(res.body, res.statusCode < 300 ? MAX_JSON_BODY : MAX_ERROR_BODY).catch((e) => {
      throw transportError(this.label, e);
    });
    if (res.statusCode >= 300) {
      const ra = res.headers['retry-after'];
      throw statusError(this.label, res.statusCode, text, Array.isArray(ra) ? ra[0] : ra);
    }
    if (text.trim() === '') return {} as T;
    try {
      return JSON.parse(text) as T;
    } catch {
      throw new VideoProviderError(
        `${this.label} answered ${res.statusCode} with a body that is not JSON`,
        res.statusCode,
        true,
        'invalid_response',
      );
    }
  }

  /**
   * Opens `url` as a stream. Redirects are followed by hand so that `authHeaders` (the provider key) are sent
   * only to the provider's own origin, never to wherever a redirect points.
   */
  async download(url: string, authHeaders: Record<string, string>, signal?: AbortSignal): Promise<Download> {
    let current = new URL(url);
    for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
      if (current.protocol !== 'https:' && current.protocol !== 'http:') {
        throw new VideoProviderError(
          `${this.label}: result URL has unsupported scheme ${current.protocol}`,
          null,
          false,
          'invalid_result_url',
        );
      }
      const sameOrigin = current.origin === this.origin;
      let res: Dispatcher.ResponseData;
      try {
        res = await request(current, {
          method: 'GET',
          signal,
          dispatcher: sameOrigin ? this.pool : this.agent,
          headers: sameOrigin ? authHeaders : {},
          headersTimeout: this.timeoutMs,
          bodyTimeout: this.timeoutMs,
        });
      } catch (e) {
        throw transportError(this.label, e);
      }
      if (res.statusCode >= 300 && res.statusCode < 400 && res.headers.location) {
        res.body.resume();
        current = new URL(String(res.headers.location), current);
        continue;
      }
      if (res.statusCode >= 300) {
        const text = await readText(res.body, MAX_ERROR_BODY).catch(() => '');
        throw statusError(`${this.label} download`, res.statusCode, text);
      }
      const len = res.headers['content-length'];
      const n = len === undefined ? NaN : Number(len);
      const ct = res.headers['content-type'];
      return {
        body: res.body,
        contentLength: Number.isSafeInteger(n) ? n : null,
        contentType: typeof ct === 'string' ? ct : null,
      };
    }
    throw new VideoProviderError(
      `${this.label}: too many redirects downloading the result`,
      null,
      true,
      'too_many_redirects',
    );
  }

  async close(): Promise<void> {
    await Promise.all([this.pool.close(), this.agent.close()]);
  }
}

async function readText(body: Dispatcher.ResponseData['body'], limit: number): Promise<string> {
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const c of body) {
    n += (c as Buffer).length;
    if (n > limit) {
      body.destroy();
      throw new Error(`response body over ${limit} bytes`);
    }
    chunks.push(c as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function transportError(label: string, e: unknown): VideoProviderError {
  const err = e as { name?: string; code?: string; message?: string };
  if (err?.name === 'AbortError') return new VideoProviderError(`${label}: request aborted`, null, true, 'aborted');
  const timeout = /Timeout/i.test(err?.code ?? '') || /timeout/i.test(err?.message ?? '');
  // Marked for the retry loop (src/modelCall): a submission may go on to another deployment.
  return markFailure(
    new VideoProviderError(
      `${label} ${timeout ? 'timed out' : `unreachable (${err?.code ?? err?.message ?? 'error'})`}`,
      null,
      true,
      timeout ? 'timeout' : 'connection_error',
    ),
    timeout ? 'timeout' : 'connect',
  );
}

/** Maps a non-2xx provider answer; the message is the provider's own when its body says one. */
export function statusError(label: string, status: number, text: string, retryAfter?: string): VideoProviderError {
  let message = '';
  let code: string | null = null;
  try {
    const b = JSON.parse(text) as {
      error?: { message?: unknown; code?: unknown; status?: unknown } | string;
      message?: unknown;
      code?: unknown;
    };
    if (b && typeof b.error === 'object' && b.error) {
      if (typeof b.error.message === 'string') message = b.error.message;
      const c = b.error.status ?? b.error.code;
      if (typeof c === 'string' || typeof c === 'number') code = String(c);
    } else if (typeof b?.error === 'string') message = b.error;
    if (!message && typeof b?.message === 'string') message = b.message;
    if (!code && (typeof b?.code === 'string' || typeof b?.code === 'number')) code = String(b.code);
  } catch {}
  if (!message) message = text.slice(0, 300) || `HTTP ${status}`;
  return markFailure(
    new VideoProviderError(`${label} answered ${status}: ${message}`, status, isRetryableStatus(status), code),
    classOfStatus(status),
    retryAfter,
  );
}
