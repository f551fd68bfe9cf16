import Router from '@koa/router';
import type Koa from 'koa';
import type { AppDeps } from '../operations';
import { ApiError } from '../errors';
import { declareRoute } from '../observability';
import { setRateLimitHeaders } from '../modelCall';
import { authenticate, jsonBodyReader, multipartBody, type MultipartOptions } from './middleware';
import { removeUploads } from './uploads';
import type { Ctx, GatewayState } from './requestState';

/**
 * The one builder of the API's routes: a route says what it is (its API family's shape, its key, its body, its
 * schema) and its handler parses what is left, calls one operation or service and renders; the checks every route
 * needs run here, in one middleware, in one order:
 *   route label -> error shape -> API key (401 before the body is read) -> the shape's own headers
 *   (anthropic-version) -> body (JSON, multipart, or either by Content-Type) -> schema -> handler,
 * and an authenticated response carries the key's rate-limit headers whatever the outcome
 * (addRateLimitHeaders below). A multipart route's temp files are removed once its handler has run.
 */

/** The interface whose errors (and credentials, rate-limit headers) a route speaks. */
export type Shape = 'openai' | 'anthropic' | 'gemini';

export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export interface JsonBodySpec {
  /** The largest body, inflated, in bytes. */
  json: number;
  /** The text as received stays readable with receivedJsonText (a signature over the bytes). */
  keepText?: boolean;
}

export interface MultipartBodySpec extends MultipartOptions {
  /** The largest file, in bytes. */
  multipart: number;
  /** Runs when the form or the handler fails (files streamed elsewhere than temp files are discarded here). */
  onFailure?: (ctx: Ctx) => Promise<void>;
}

/** Either, by Content-Type: multipart/form-data is a form, anything else JSON (what the JSON reader says of it). */
export interface JsonOrMultipartBodySpec {
  json: number;
  multipart: number;
}

export type BodySpec = 'none' | JsonBodySpec | MultipartBodySpec | JsonOrMultipartBodySpec;

export interface RouteSpec<B = unknown> {
  method: Method;
  /** The @koa/router path; also the route's metrics label. */
  path: string;
  /**
   * Absent: as the error handler decides by path (Anthropic's under /v1/messages, Gemini's under /v1beta, else
   * OpenAI's). A function picks it per request (GET /v1/models answers Gemini's clients in Gemini's shape).
   */
  shape?: Shape | ((ctx: Ctx) => Shape);
  /** `key` (the default): a project API key, a 401 without. `none`: the route authenticates its caller itself. */
  auth?: 'key' | 'none';
  body?: BodySpec;
  /** The body's schema (src/schemas/, ajv): throws a 400 in the route's shape. */
  validate?: (body: unknown) => asserts body is B;
  handler: (ctx: Ctx, body: B) => unknown;
}

export interface ApiRoutes {
  readonly router: Router<GatewayState>;
  add<B = unknown>(spec: RouteSpec<B>): ApiRoutes;
}

type Defaults = Pick<RouteSpec, 'shape' | 'auth'>;

/** The Anthropic API's one required header, checked after the key and before the body. */
export function requireAnthropicVersion(ctx: Ctx): void {
  const v = ctx.get('anthropic-version');
  if (!v)
    throw new ApiError(
      400,
      'anthropic-version: header is required (for example "anthropic-version: 2023-06-01").',
      'invalid_request_error',
      'anthropic-version',
      'missing_required_header',
    );
  if (!/^\d{4}-\d{2}-\d{2}$/.test(v))
    throw new ApiError(
      400,
      `anthropic-version: "${v.slice(0, 40)}" is not a version date (YYYY-MM-DD).`,
      'invalid_request_error',
      'anthropic-version',
      'invalid_value',
    );
}

type Run = (ctx: Ctx) => Promise<void>;

/** Reads the body as the spec says, then runs `then`; a form's temp files are gone when it returns. */
function bodyReader(spec: BodySpec, then: Run): Run {
  if (spec === 'none') return then;
  const json = 'json' in spec ? jsonBodyReader(spec.json, 'keepText' in spec && spec.keepText === true) : null;
  const afterJson: Run = async (ctx) => {
    await json!(ctx);
    await then(ctx);
  };
  if (!('multipart' in spec)) return afterJson;
  const { multipart: maxFileBytes, onFailure, ...options } = spec as MultipartBodySpec;
  const form = multipartBody(maxFileBytes, 'json' in spec ? {} : options);
  const afterForm: Run = async (ctx) => {
    try {
      await form(ctx, () => then(ctx));
    } catch (e) {
      await onFailure?.(ctx);
      throw e;
    } finally {
      await removeUploads(ctx);
    }
  };
  return json ? (ctx) => (ctx.is('multipart/form-data') ? afterForm(ctx) : afterJson(ctx)) : afterForm;
}

/**
 * After an authenticated request has run (a success or an error alike; errorHandler keeps the headers): gives its
 * response the key's rate-limit headers if its admission did not (src/modelCall/rateLimit.ts). The look at the
 * window counts nothing; a request that was admitted (every billed one) needs no second call to the limiter.
 * Never throws.
 */
async function addRateLimitHeaders(ctx: Ctx, deps: Pick<AppDeps, 'limiter'>): Promise<void> {
  const p = ctx.state.principal;
  if (!p || ctx.state.rateLimitHeaders || ctx.res.headersSent || (p.limits.rpm === null && p.limits.tpm === null))
    return;
  const view = await deps.limiter.peek(p.keyId, { rpm: p.limits.rpm, tpm: p.limits.tpm });
  ctx.state.rateLimitHeaders = true;
  setRateLimitHeaders(ctx.res, ctx.state.errorShape === 'anthropic', view);
}

/** The route's one middleware. */
export function routeMiddleware<B>(
  deps: Pick<AppDeps, 'keys' | 'limiter' | 'adminKeys'>,
  spec: RouteSpec<B>,
): Koa.Middleware<GatewayState> {
  const name = declareRoute(spec.path);
  const { shape, validate, handler } = spec;
  const handle: Run = async (ctx) => {
    const body = (ctx.request as { body?: unknown }).body;
    validate?.(body);
    await handler(ctx, body as B);
  };
  const read = bodyReader(spec.body ?? 'none', handle);
  const afterKey: Run = async (ctx) => {
    if (ctx.state.errorShape === 'anthropic') requireAnthropicVersion(ctx);
    await read(ctx);
  };
  const keyed = spec.auth !== 'none';
  return async (ctx) => {
    ctx.state.route = name;
    if (shape) ctx.state.errorShape = typeof shape === 'function' ? shape(ctx) : shape;
    if (!keyed) return afterKey(ctx);
    await authenticate(ctx, deps.keys, deps.adminKeys);
    try {
      await afterKey(ctx);
    } finally {
      await addRateLimitHeaders(ctx, deps);
    }
  };
}

/** A router of one API family whose routes are all built by routeMiddleware, with the family's defaults. */
export function apiRoutes(deps: Pick<AppDeps, 'keys' | 'limiter' | 'adminKeys'>, defaults: Defaults = {}): ApiRoutes {
  const router = new Router<GatewayState>();
  const api: ApiRoutes = {
    router,
    add(spec) {
      const mw = routeMiddleware(deps, { ...defaults, ...spec });
      router[spec.method.toLowerCase() as Lowercase<Method>](spec.path, mw);
      return api;
    },
  };
  return api;
}
