import { redactorFor, type Redactor, fitOutputCap } from '../../catalog';
import Router from '@koa/router';
import type Koa from 'koa';
import type { AppDeps } from '../../operations';
import { jsonBody, requireApiKey, route, type Ctx, type GatewayState } from '../middleware';
import { ApiError } from '../../errors';
import { anthropicType } from '../../errorBodies';
import type { CountTokensRequest } from '../../schemas';
import { isUpstreamError, type UpstreamHttpError } from '../../providers';
import {
  countMessageTokens,
  createMessage,
  validateCountTokens,
  validateMessages,
  type AnthropicHeaders,
} from '../../operations/messages';
import { callerOf } from '../httpCaller';

/**
 * POST /v1/messages and POST /v1/messages/count_tokens: the Anthropic Messages interface for any chat
 * model. A model served over Anthropic Messages (an `anthropic` provider, Claude on `bedrock` or `vertex`) is passed
 * through natively (body and SSE as produced, usage read from the stream as it passes); any other chat model is
 * translated to chat and back (src/translate), its chat request sent to /chat/completions or, for an
 * `api: "responses"` model, bridged to /responses (src/providers/chatBackends.ts).
 * The operation and its two paths: src/operations/messages/ (index.ts, native.ts, translated.ts).
 * Errors use the Anthropic shape; the path's query string (Claude Code sends ?beta=true) is ignored.
 */

/** Anthropic-shaped errors from here on, including the 401s of requireApiKey. */
const anthropicErrors: Koa.Middleware<GatewayState> = async (ctx, next) => {
  ctx.state.errorShape = 'anthropic';
  await next();
};

const requireVersion: Koa.Middleware<GatewayState> = async (ctx, next) => {
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
  await next();
};

/** An Anthropic upstream's error, as it sent it (Claude Code matches on the wording), in the Anthropic shape. */
function renderUpstreamError(ctx: Ctx, e: UpstreamHttpError, redact: Redactor): void {
  renderUpstreamBody(ctx, e);
  // The upstream's wording is kept (Claude Code matches on it), less any upstream names (the log keeps those).
  ctx.body = JSON.parse(redact(JSON.stringify(ctx.body)));
}

function renderUpstreamBody(ctx: Ctx, e: UpstreamHttpError): void {
  let body: unknown = null;
  try {
    body = JSON.parse(e.body);
  } catch {}
  const o = body as {
    type?: unknown;
    error?: { type?: unknown; message?: unknown } | string;
    message?: unknown;
  } | null;
  ctx.status = e.status;
  for (const [k, v] of Object.entries(e.headers)) ctx.set(k, v);
  if (o && o.type === 'error' && o.error && typeof o.error === 'object') {
    ctx.body = { ...o, request_id: ctx.state.requestId };
    return;
  }
  const msg =
    (o?.error && typeof o.error === 'object' && typeof o.error.message === 'string' ? o.error.message : null) ??
    (typeof o?.message === 'string' ? o.message : null) ??
    (e.body.trim().slice(0, 500) || `upstream answered HTTP ${e.status}`);
  ctx.body = { type: 'error', error: { type: anthropicType(e.status), message: msg }, request_id: ctx.state.requestId };
}

/** The Anthropic request headers passed upstream. */
function anthropicHeaders(ctx: Ctx): AnthropicHeaders {
  return { version: ctx.get('anthropic-version'), beta: ctx.get('anthropic-beta') || undefined };
}

export function messagesRouter(deps: AppDeps): Router<GatewayState> {
  const router = new Router<GatewayState>();
  const auth = requireApiKey(deps);
  const body = jsonBody(deps.config.maxJsonBytes);

  router.post('/v1/messages', route('/v1/messages'), anthropicErrors, auth, requireVersion, body, async (ctx) => {
    const req = ctx.request.body as unknown;
    validateMessages(req);
    const model = deps.catalog.require(req.model, 'chat');
    ctx.state.model = model.id;
    req.max_tokens = fitOutputCap(ctx, model, req.model, req.max_tokens);
    try {
      await createMessage(callerOf(ctx, deps), deps, model, req, anthropicHeaders(ctx));
    } catch (e) {
      if (isUpstreamError(e, 'anthropic')) return renderUpstreamError(ctx, e, redactorFor(deps.catalog));
      throw e;
    }
  });

  router.post(
    '/v1/messages/count_tokens',
    route('/v1/messages/count_tokens'),
    anthropicErrors,
    auth,
    requireVersion,
    body,
    async (ctx) => {
      const req = ctx.request.body as unknown;
      validateCountTokens(req);
      const model = deps.catalog.require(req.model, 'chat');
      ctx.state.model = model.id;
      try {
        await countMessageTokens(callerOf(ctx, deps), deps, model, req, anthropicHeaders(ctx));
      } catch (e) {
        if (isUpstreamError(e, 'anthropic')) return renderUpstreamError(ctx, e, redactorFor(deps.catalog));
        throw e;
      }
    },
  );

  return router;
}

export type { CountTokensRequest };
