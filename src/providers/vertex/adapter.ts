import type { Pool } from 'undici';
import type { Dispatcher } from 'undici';
import { upstreamPool } from '../upstreamDispatch';
import { ApiError } from '../../errors';
import { anthropicType } from '../../errorBodies';
import type { ProviderConfig } from '../../catalog';
import { isClaudeModel } from '../anthropic/models';
import { mapTransportError } from '../openai/adapter';
import { noCredentials, readErrorBody, refusal } from '../upstreamError';
import type { CallOptions, ProviderAdapter } from '../types';
import { withTraceparent } from '../../observability';
import { readWholeAnswer } from '../wholeAnswer';
import type { GeminiResponse, GeminiUpstream } from '../gemini/adapter';
import {
  cloudMessagesBody,
  type MessagesAnswer,
  type MessagesHeaders,
  type MessagesUpstream,
} from '../messagesUpstream';
import { VertexAuth } from '../googleCloudAuth';

/**
 * Google Vertex AI: `{base}/v1/projects/{project}/locations/{region}/publishers/{publisher}/models/{model}:{method}`
 * with an OAuth bearer token (src/providers/vertex/auth.ts). Claude (publisher `anthropic`) through rawPredict /
 * streamRawPredict with Anthropic's Messages body (`anthropic_version: vertex-2023-10-16`, no `model`), answering in
 * Anthropic's JSON and SSE; Gemini (publisher `google`) through generateContent / streamGenerateContent?alt=sse,
 * the Gemini API's own bodies. One keep-alive undici Pool per origin. Errors keep their status and the upstream's
 * message (project paths removed) in the shape of the protocol spoken; the gateway's refused token is a 502.
 */

export const VERTEX_ANTHROPIC_VERSION = 'vertex-2023-10-16';
const PROJECT_PATH = /projects\/[^/\s"']+(\/locations\/[^/\s"']+)?/g;

/** Vertex's URL of a publisher's model and method under a provider's base URL, project and region. */
export function vertexModelPath(cfg: ProviderConfig, publisher: string, model: string, method: string): string {
  const base = new URL(cfg.baseUrl).pathname.replace(/\/+$/, '');
  const loc = `projects/${encodeURIComponent(cfg.project!)}/locations/${encodeURIComponent(cfg.region!)}`;
  return `${base}/v1/${loc}/publishers/${publisher}/models/${encodeURIComponent(model)}:${method}`;
}

/** The key file of a vertex provider: its own `credentialsFileEnv`, else application-default credentials. */
export function vertexKeyFile(cfg: ProviderConfig, env: NodeJS.ProcessEnv = process.env): string | undefined {
  return (cfg.credentialsFileEnv ? env[cfg.credentialsFileEnv] : undefined) || env.GOOGLE_APPLICATION_CREDENTIALS;
}

export class VertexAdapter implements ProviderAdapter, MessagesUpstream, GeminiUpstream {
  readonly kind = 'vertex' as const;
  readonly id: string;
  private readonly pool: Pool;
  private readonly auth: VertexAuth;

  constructor(
    private readonly cfg: ProviderConfig,
    private readonly opts: { connections?: number; onError?: (providerId: string, status: number) => void } = {},
  ) {
    this.id = cfg.id;
    this.auth = new VertexAuth(vertexKeyFile(cfg));
    const timeout = cfg.timeoutMs ?? 600_000;
    this.pool = upstreamPool(new URL(cfg.baseUrl).origin, timeout, opts);
  }

  messagesFor(upstreamModel: string): MessagesUpstream | null {
    return isClaudeModel(upstreamModel) ? this : null;
  }

  geminiFor(upstreamModel: string): GeminiUpstream | null {
    return isClaudeModel(upstreamModel) ? null : this;
  }

  async messages(payload: string, h: MessagesHeaders, opts: CallOptions = {}): Promise<MessagesAnswer> {
    const { model, stream, body } = cloudMessagesBody(payload, VERTEX_ANTHROPIC_VERSION, true);
    const path = vertexModelPath(this.cfg, 'anthropic', model, stream ? 'streamRawPredict' : 'rawPredict');
    const res = await this.post(
      path,
      JSON.stringify(body),
      h.beta ? { 'anthropic-beta': h.beta } : {},
      'anthropic',
      opts,
    );
    const requestId = res.headers['x-request-id'] ?? res.headers['request-id'];
    return {
      status: res.statusCode,
      contentType: header(res.headers, 'content-type'),
      headers: requestId ? { 'upstream-request-id': String(requestId) } : {},
      body: res.body,
    };
  }

  async messagesWhole(
    payload: string,
    h: MessagesHeaders,
    opts: CallOptions = {},
  ): Promise<MessagesAnswer & { raw: Buffer }> {
    const res = await this.messages(payload, h, opts);
    const body = res.body as Dispatcher.ResponseData['body'];
    const raw = await readWholeAnswer({ status: res.status, body }, payload, opts, (e) => this.transportError(e, opts));
    return { ...res, raw };
  }

  /** A Gemini method on a Google model (generateContent, streamGenerateContent with `sse`, countTokens). */
  async call(
    model: string,
    method: string,
    payload: string,
    opts: CallOptions & { sse?: boolean } = {},
  ): Promise<GeminiResponse> {
    const path = vertexModelPath(this.cfg, 'google', model, method) + (opts.sse ? '?alt=sse' : '');
    const res = await this.post(path, payload, {}, 'gemini', opts);
    return { status: res.statusCode, body: res.body };
  }

  async callWhole(model: string, method: string, payload: string, opts: CallOptions = {}): Promise<Buffer> {
    const res = await this.call(model, method, payload, opts);
    return readWholeAnswer(res, payload, opts, (e) => this.transportError(e, opts));
  }

  close(): Promise<void> {
    return this.pool.close();
  }

  private async post(
    path: string,
    payload: string,
    extra: Record<string, string>,
    shape: 'anthropic' | 'gemini',
    opts: CallOptions,
  ): Promise<Dispatcher.ResponseData> {
    let authorization: string;
    try {
      authorization = await this.auth.authorization();
    } catch {
      // No token (a missing or broken key file, the token endpoint refusing or unreachable): the gateway's own
      // credentials, never the client's; the log keeps the cause.
      this.opts.onError?.(this.id, 401);
      throw noCredentials();
    }
    let res: Dispatcher.ResponseData;
    try {
      res = await this.pool.request({
        method: 'POST',
        path,
        headers: withTraceparent({ 'content-type': 'application/json', authorization, ...extra }, opts.trace),
        body: payload,
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
    const ra = header(res.headers, 'retry-after');
    const headers: Record<string, string> = ra ? { 'retry-after': ra } : {};
    throw refusal('vertex', res.statusCode, errorBody(res.statusCode, text, shape), headers, shape);
  }

  private transportError(e: unknown, opts: CallOptions): Error {
    if (e instanceof ApiError) return e;
    if (opts.abort?.reason) return opts.abort.reason;
    const err = mapTransportError(e);
    this.opts.onError?.(this.id, err.status);
    return err;
  }
}

/**
 * Vertex's error body in the shape of the protocol spoken, its message without project paths: Claude's errors come
 * in Anthropic's shape or Google's (the platform's own: quota, permissions), Gemini's in Google's.
 */
function errorBody(status: number, text: string, shape: 'anthropic' | 'gemini'): string {
  let message = `upstream answered HTTP ${status}`;
  let googleStatus: string | undefined;
  try {
    const b = JSON.parse(text) as { error?: { message?: unknown; status?: unknown } | unknown; message?: unknown };
    const e = b.error as { message?: unknown; status?: unknown } | undefined;
    if (e && typeof e.message === 'string') message = e.message;
    else if (typeof b.message === 'string') message = b.message;
    if (e && typeof e.status === 'string') googleStatus = e.status;
  } catch {}
  message = message.replace(PROJECT_PATH, 'the project');
  if (shape === 'anthropic') return JSON.stringify({ type: 'error', error: { type: anthropicType(status), message } });
  return JSON.stringify({ error: { code: status, message, ...(googleStatus ? { status: googleStatus } : {}) } });
}

function header(h: Dispatcher.ResponseData['headers'], name: string): string {
  const v = h[name];
  return Array.isArray(v) ? (v[0] ?? '') : (v ?? '');
}
