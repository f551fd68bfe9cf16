import { redactorFor, type Redactor } from '../../catalog/redact';
import Router from '@koa/router';
import type Koa from 'koa';
import type { AppDeps } from '../../operations/deps';
import { jsonBody, requireApiKey, route, type Ctx, type GatewayState } from '../middleware';
import { ApiError } from '../../errors';
import { anthropicType } from '../../errorBodies';
import type { ModelConfig } from '../../catalog/catalog';
import { fitOutputCap } from '../../catalog/outputCap';
import { validateCountTokens, validateMessages, type CountTokensRequest } from '../../schemas/messages';
import { isUpstreamError, type UpstreamHttpError } from '../../providers/upstreamError';
import type { MessagesUpstream } from '../../providers/messagesUpstream';
import { translateInput } from '../../translate/translateInput';
import { estimateInputTokens } from '../../translate/tokenEstimate';
import { requestAbort } from '../../operations/routedCall';
import { SseSink } from '../../sse/clientSink';
import { anthropicHeaders, nativeMessages } from '../messages/native';
import { translatedMessages } from '../messages/translated';
import { servedNatively } from '../../providers/kinds';

/**
 * POST /v1/messages and POST /v1/messages/count_tokens: the Anthropic Messages interface for any chat
 * model. A model served over Anthropic Messages (an `anthropic` provider, Claude on `bedrock` or `vertex`) is passed
 * through natively (body and SSE as produced, usage read from the stream as it passes); any other chat model is
 * translated to chat and back (src/translate), its chat request sent to /chat/completions or, for an
 * `api: "responses"` model, bridged to /responses (src/providers/chatBackends.ts).
 * The two paths are src/api/messages/native.ts and translated.ts.
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

export function messagesRouter(deps: AppDeps): Router<GatewayState> {
  const router = new Router<GatewayState>();
  const auth = requireApiKey(deps);
  const body = jsonBody(deps.config.maxJsonBytes);

  /** The upstream serving the model natively over Messages (Anthropic, Claude on Bedrock or Vertex), if any. */
  function nativeAdapter(model: ModelConfig): MessagesUpstream | null {
    if (!servedNatively(deps.catalog.provider(model).kind, model, 'messages')) return null;
    return deps.providers.get(model.provider)?.messagesFor?.(model.upstreamModel) ?? null;
  }

  router.post('/v1/messages', route('/v1/messages'), anthropicErrors, auth, requireVersion, body, async (ctx) => {
    const req = ctx.request.body as unknown;
    validateMessages(req);
    const model = deps.catalog.require(req.model, 'chat');
    ctx.state.model = model.id;
    req.max_tokens = fitOutputCap(ctx, model, req.model, req.max_tokens);
    const native = nativeAdapter(model);
    const sink = new SseSink(ctx, requestAbort(ctx));
    try {
      if (native) await nativeMessages(ctx, deps, model, native, req, sink);
      else await translatedMessages(ctx, deps, model, req, sink);
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
      const native = nativeAdapter(model);
      if (!native?.countTokens) {
        // No upstream counter: the documented estimate (see tokenEstimate.ts).
        ctx.body = { input_tokens: translateInput(() => estimateInputTokens(req, model)) };
        return;
      }
      try {
        const res = await native.countTokens(
          JSON.stringify({ ...req, model: model.upstreamModel }),
          anthropicHeaders(ctx),
        );
        ctx.status = res.status;
        ctx.type = res.contentType || 'application/json';
        ctx.body = Buffer.from(await res.body.arrayBuffer());
      } catch (e) {
        if (isUpstreamError(e, 'anthropic')) return renderUpstreamError(ctx, e, redactorFor(deps.catalog));
        throw e;
      }
    },
  );

  return router;
}

export type { CountTokensRequest };
