import http from 'node:http';
import { randomUUID } from 'node:crypto';
import type Koa from 'koa';
import type { KoaBodyMiddlewareOptions } from 'koa-body';
import { ApiError, anthropicBody, openAIBody } from './errors';
import { isJsonType, readJson } from './jsonBody';
import type { AppDeps } from './deps';
import type { Principal } from '../auth/apiKeys';
import { declareRoute, methodLabel, routeLabel } from '../observability/routeLabel';
import { redactorFor } from '../catalog/redact';
import type { Meter } from '../billing/meter';

export interface GatewayState {
  requestId: string;
  principal?: Principal;
  /** Set by routers so logs and metrics can label by model. */
  model?: string;
  /** Set by routers whose errors use the Anthropic shape. */
  errorShape?: 'openai' | 'anthropic';
  /** The matched route pattern, set only by route() / jsonApi() (metrics label: see observability/routeLabel.ts). */
  route?: string;
  /** The request's funds reservation (see reserve.ts): cancelled by errorHandler if still open when an error escapes. */
  meter?: Meter;
}
export type Ctx = Koa.ParameterizedContext<GatewayState>;

/** Request id (echoed as x-request-id), one JSON log line per request, and Prometheus counters/latency. */
export function observe(deps: Pick<AppDeps, 'logger' | 'metrics'>): Koa.Middleware<GatewayState> {
  return async (ctx, next) => {
    const start = process.hrtime.bigint();
    const incoming = ctx.get('x-request-id');
    ctx.state.requestId = /^[\w.:-]{1,128}$/.test(incoming) ? incoming : randomUUID();
    ctx.set('x-request-id', ctx.state.requestId);
    ctx.set('request-id', ctx.state.requestId);
    const done = () => {
      const sec = Number(process.hrtime.bigint() - start) / 1e9;
      // A client that left before the response was complete is a 499 (as nginx logs it), not whatever status
      // Koa held at that moment (404 until a handler sets one).
      const status = ctx.res.writableFinished ? ctx.status : 499;
      deps.metrics.observeRequest(routeLabel(ctx.state.route), methodLabel(ctx.method), status, ctx.state.model ?? '', sec);
      deps.logger.info({ reqId: ctx.state.requestId, method: ctx.method, path: ctx.path, status, ms: Math.round(sec * 1e6) / 1e3, account: ctx.state.principal?.accountId, model: ctx.state.model }, 'request');
    };
    // Log and measure when the response is fully sent (streams finish long after the middleware chain returns).
    ctx.res.once('close', done);
    await next();
  };
}

/** Maps every thrown error to the interface's error shape; never leaks a stack trace. */
export function errorHandler(deps: Pick<AppDeps, 'logger' | 'catalog'>): Koa.Middleware<GatewayState> {
  const redact = redactorFor(deps.catalog);
  return async (ctx, next) => {
    try {
      await next();
      if (ctx.status === 404 && ctx.body === undefined) {
        throw new ApiError(404, `Unknown request URL: ${ctx.method} ${ctx.path}.`, 'invalid_request_error', null, 'unknown_url');
      }
      // Statuses set without a body (the routers' 405/501 for a known path with another method) get a JSON error too.
      if (ctx.status >= 400 && ctx.body == null) {
        const allow = ctx.response.get('allow');
        if (ctx.status === 405) throw new ApiError(405, `Method ${ctx.method} is not allowed on ${ctx.path}${allow ? `; allowed: ${allow}` : ''}.`, 'invalid_request_error', null, 'method_not_allowed');
        throw new ApiError(ctx.status, http.STATUS_CODES[ctx.status] ?? 'Request failed.', undefined, null, null);
      }
    } catch (err) {
      let e = toApiError(err);
      // Whatever failed, funds reserved for this request are returned now (a no-op once settled or cancelled).
      ctx.state.meter?.cancel({}, e.status);
      if (e.status >= 500) deps.logger.error({ reqId: ctx.state.requestId, err: err instanceof Error ? { message: err.message, stack: err.stack } : String(err) }, 'request failed');
      if (ctx.headerSent || ctx.res.headersSent) {
        // Mid-stream failure: nothing more can be said in HTTP; end the response.
        ctx.res.end();
        return;
      }
      // Adapter and upstream messages may name provider ids or upstream model names: the client gets them redacted.
      const message = redact(e.message);
      if (message !== e.message) {
        if (e.status < 500) deps.logger.warn({ reqId: ctx.state.requestId, status: e.status, detail: e.message }, 'error message redacted');
        e = new ApiError(e.status, message, e.type, e.param, e.code, e.headers);
      }
      ctx.status = e.status;
      for (const [k, v] of Object.entries(e.headers)) ctx.set(k, v);
      // /v1/messages* answers in the Anthropic shape even where its router never ran (405, unknown sub-path).
      const anthropic = ctx.state.errorShape === 'anthropic' || (ctx.state.errorShape === undefined && /^\/v1\/messages(\/|$)/i.test(ctx.path));
      ctx.body = anthropic ? anthropicBody(e, ctx.state.requestId) : openAIBody(e);
    }
  };
}

export function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  const e = err as { status?: number; statusCode?: number; expose?: boolean; message?: string; type?: string };
  const status = e?.status ?? e?.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    if (status === 413) return new ApiError(413, 'Request body too large.', 'invalid_request_error', null, 'request_too_large');
    if (status === 415) return new ApiError(415, e.message ?? 'Unsupported content type.', 'invalid_request_error', null, 'unsupported_media_type');
    if (status === 400 && (e.type === 'entity.parse.failed' || /JSON|Unexpected|invalid/i.test(e.message ?? ''))) {
      return new ApiError(400, 'We could not parse the JSON body of your request. Send valid JSON with Content-Type: application/json.', 'invalid_request_error', null, 'invalid_json');
    }
    return new ApiError(status, e.expose && e.message ? e.message : 'Bad request.', undefined, null, null);
  }
  return new ApiError(500, 'The server had an error while processing your request.', 'server_error', null, 'internal_error');
}

type BodyParser = (ctx: Ctx, next: () => Promise<unknown>) => Promise<unknown>;

/**
 * A koa-body parser, built on its first use: koa-body (with formidable and zod) is about 8 MB of resident code,
 * and only multipart uploads and compressed JSON bodies need it.
 */
function lazyKoaBody(options: Partial<KoaBodyMiddlewareOptions>): BodyParser {
  let parser: BodyParser | null = null;
  return async (ctx, next) => {
    parser ??= (await import('koa-body')).koaBody(options) as unknown as BodyParser;
    return parser(ctx, next);
  };
}

/** No real request nests deeper; recursive code downstream (validation, hashing, translation) must never see more. */
const MAX_JSON_DEPTH = 64;

/**
 * What is wrong with a parsed JSON body, if anything: nested deeper than `max`, or a prototype-poisoning key
 * (`__proto__`, or `constructor` holding a `prototype`) that a later merge of the object could act on.
 * Iterative (a recursive walk would overflow on exactly the input it guards against); stops at the first finding.
 */
export function jsonBodyProblem(root: object, max: number): 'too_deep' | 'prototype_key' | null {
  const stack: [unknown, number][] = [[root, 1]];
  while (stack.length) {
    const [v, d] = stack.pop()!;
    if (d > max) return 'too_deep';
    if (Array.isArray(v)) {
      for (const x of v) if (x !== null && typeof x === 'object') stack.push([x, d + 1]);
    } else {
      for (const k in v as Record<string, unknown>) {
        const x = (v as Record<string, unknown>)[k];
        if (k === '__proto__' || (k === 'constructor' && x !== null && typeof x === 'object' && Object.hasOwn(x, 'prototype'))) return 'prototype_key';
        if (x !== null && typeof x === 'object') stack.push([x, d + 1]);
      }
    }
  }
  return null;
}

/**
 * JSON body: 415 unless Content-Type is JSON, 413 over the limit, 400 on malformed JSON, a non-object body, a body
 * nested too deep or one carrying prototype keys. Plain bodies are read by readJson; compressed ones by koa-body.
 */
function jsonBodyReader(limitBytes: number): (ctx: Ctx) => Promise<void> {
  const parseEncoded = lazyKoaBody({ json: true, jsonLimit: limitBytes, jsonStrict: true, urlencoded: false, text: false, multipart: false, includeUnparsed: false });
  return async (ctx) => {
    const contentType = ctx.get('content-type');
    if (!isJsonType(contentType)) {
      throw new ApiError(415, `Unsupported Content-Type ${JSON.stringify(contentType)}; send application/json.`, 'invalid_request_error', null, 'unsupported_media_type');
    }
    const encoding = ctx.get('content-encoding');
    try {
      if (encoding === '' || encoding.toLowerCase() === 'identity') (ctx.request as { body?: unknown }).body = await readJson(ctx.req, limitBytes);
      else {
        // Content codings are case-insensitive (RFC 9110 8.4.1); koa-body's inflation matches lower case only.
        ctx.req.headers['content-encoding'] = encoding.toLowerCase();
        await parseEncoded(ctx, async () => undefined);
      }
    } catch (e: any) {
      if (e instanceof ApiError) throw e;
      // A Content-Encoding the body does not match (e.g. gzip header, plain body) fails in zlib, without a status.
      // (koa-body re-wraps errors from another realm as Error('{"code":"Z_..."}'), so the message is checked too.)
      // zlib says Z_DATA_ERROR and the like; brotli ERR__ERROR_FORMAT_... (its code: ERR_BROTLI_...).
      if (/\bZ_[A-Z_]+\b|ERR__ERROR_FORMAT|BROTLI/.test(`${e?.code ?? ''} ${e?.message ?? ''}`)) throw new ApiError(400, 'The request body could not be decoded with its Content-Encoding.', 'invalid_request_error', null, 'invalid_body_encoding');
      // The client went away before its body was read (raw-body: "stream is not readable" / "request aborted"):
      // the client's doing, not a 500 with a stack trace in the logs.
      // co-body refuses prototype keys itself in compressed bodies: the same answer as for a plain body.
      if (/forbidden prototype property/.test(`${e?.message ?? ''}`)) {
        throw new ApiError(400, 'The JSON body contains a forbidden key ("__proto__", or "constructor" with a "prototype").', 'invalid_request_error', null, 'invalid_json');
      }
      if (/stream is not readable|request aborted/.test(`${e?.message ?? ''}`)) {
        throw new ApiError(400, 'The request body could not be read: the client closed the connection.', 'invalid_request_error', null, 'request_aborted');
      }
      throw e;
    }
    const body = ctx.request.body;
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
      throw new ApiError(400, 'The request body must be a JSON object.', 'invalid_request_error', null, 'invalid_json');
    }
    const problem = jsonBodyProblem(body, MAX_JSON_DEPTH);
    if (problem === 'too_deep') {
      throw new ApiError(400, `The JSON body is nested more than ${MAX_JSON_DEPTH} levels deep.`, 'invalid_request_error', null, 'invalid_json');
    }
    if (problem === 'prototype_key') {
      throw new ApiError(400, 'The JSON body contains a forbidden key ("__proto__", or "constructor" with a "prototype").', 'invalid_request_error', null, 'invalid_json');
    }
  };
}

export function jsonBody(limitBytes: number): Koa.Middleware<GatewayState> {
  const read = jsonBodyReader(limitBytes);
  return async (ctx, next) => {
    await read(ctx);
    await next();
  };
}

const MULTIPART_LIMITS = { maxFiles: 4, maxFields: 50, maxFieldsSize: 1024 * 1024 };

/**
 * formidable's error codes (FormidableError.js) for the limits, by the option each one enforces. Errors reach us
 * either as formidable's own (with `code`) or, from another realm, re-wrapped by koa-body with the fields as JSON
 * in the message.
 */
const LIMIT_CODES: Record<number, 'maxFiles' | 'maxFields' | 'maxFieldsSize' | 'maxFileSize'> = {
  1015: 'maxFiles', 1007: 'maxFields', 1006: 'maxFieldsSize', 1016: 'maxFileSize', 1009: 'maxFileSize',
};
function exceededLimit(e: unknown): 'maxFiles' | 'maxFields' | 'maxFieldsSize' | 'maxFileSize' | null {
  const err = e as { code?: unknown; message?: unknown } | null;
  let code = err?.code;
  if (typeof code !== 'number' && typeof err?.message === 'string' && err.message.startsWith('{')) {
    try {
      code = (JSON.parse(err.message) as { code?: unknown }).code;
    } catch {}
  }
  if (typeof code === 'number' && code in LIMIT_CODES) return LIMIT_CODES[code];
  const m = /options\.(maxFiles|maxFields|maxFieldsSize|maxFileSize|maxTotalFileSize) \(/.exec(String(err?.message));
  return m ? (m[1] === 'maxTotalFileSize' ? 'maxFileSize' : (m[1] as 'maxFiles' | 'maxFields' | 'maxFieldsSize' | 'maxFileSize')) : null;
}

/** Multipart body (transcriptions, image edits, videos): files go to temp files; counts and sizes are limited. */
export function multipartBody(maxFileBytes: number): Koa.Middleware<GatewayState> {
  const parse = lazyKoaBody({ multipart: true, json: false, urlencoded: false, text: false, formidable: { maxFileSize: maxFileBytes, ...MULTIPART_LIMITS } });
  return async (ctx, next) => {
    if (!ctx.is('multipart/form-data')) {
      throw new ApiError(415, `Unsupported Content-Type ${JSON.stringify(ctx.get('content-type') || '')}; send multipart/form-data.`, 'invalid_request_error', null, 'unsupported_media_type');
    }
    try {
      await parse(ctx, async () => undefined);
    } catch (e) {
      switch (exceededLimit(e)) {
        case 'maxFileSize': throw new ApiError(413, `File too large (limit ${maxFileBytes} bytes).`, 'invalid_request_error', 'file', 'file_too_large');
        case 'maxFiles': throw new ApiError(400, `Too many files in the form: at most ${MULTIPART_LIMITS.maxFiles}.`, 'invalid_request_error', null, 'too_many_files');
        case 'maxFields': throw new ApiError(400, `Too many fields in the form: at most ${MULTIPART_LIMITS.maxFields}.`, 'invalid_request_error', null, 'too_many_fields');
        case 'maxFieldsSize': throw new ApiError(413, `Form fields too large: at most ${MULTIPART_LIMITS.maxFieldsSize} bytes of field data in all.`, 'invalid_request_error', null, 'fields_too_large');
        default: throw new ApiError(400, 'Malformed multipart body.', 'invalid_request_error', null, 'invalid_multipart');
      }
    }
    await next();
  };
}

/** Reads the API key from `Authorization: Bearer` or `x-api-key`; 401 in the route's error shape otherwise. */
async function authenticate(ctx: Ctx, keys: AppDeps['keys']): Promise<void> {
  const auth = ctx.get('authorization');
  let key = '';
  if (auth) {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(auth);
    key = m ? m[1] : '';
  }
  if (!key) key = ctx.get('x-api-key').trim();
  if (!key) throw new ApiError(401, 'You did not provide an API key. Send it as Authorization: Bearer <key> (or x-api-key).', 'invalid_request_error', null, 'missing_api_key');
  const p = await keys.resolve(key);
  if (!p) throw new ApiError(401, 'Incorrect API key provided.', 'invalid_request_error', null, 'invalid_api_key');
  if (p.expiresAt !== null && Date.now() >= p.expiresAt) {
    throw new ApiError(401, `This API key expired at ${new Date(p.expiresAt).toISOString()}.`, 'invalid_request_error', null, 'expired_api_key');
  }
  ctx.state.principal = p;
}

export function requireApiKey(deps: Pick<AppDeps, 'keys'>): Koa.Middleware<GatewayState> {
  return async (ctx, next) => {
    await authenticate(ctx, deps.keys);
    await next();
  };
}

/**
 * The preamble of an authenticated JSON route in one middleware: metrics route label, API key (401 first, before
 * the body is read), JSON body. Same checks as route() + requireApiKey() + jsonBody(), two async hops fewer on
 * the busiest routes.
 */
export function jsonApi(deps: Pick<AppDeps, 'keys'>, name: string, limitBytes: number): Koa.Middleware<GatewayState> {
  const read = jsonBodyReader(limitBytes);
  declareRoute(name);
  return async (ctx, next) => {
    ctx.state.route = name;
    await authenticate(ctx, deps.keys);
    await read(ctx);
    await next();
  };
}

/** Labels the request with its route pattern for metrics (set by each router). */
export function route(name: string): Koa.Middleware<GatewayState> {
  declareRoute(name);
  return async (ctx, next) => {
    ctx.state.route = name;
    await next();
  };
}
