import Router from '@koa/router';
import type { AppDeps } from '../../operations';
import { jsonBody, requireApiKey, route, type Ctx, type GatewayState } from '../middleware';
import { ApiError, badRequest } from '../../errors';
import { fitOutputCap, redactorFor } from '../../catalog';
import type { EmbedContentBody } from '../../schemas';
import { isUpstreamError, type UpstreamHttpError } from '../../providers';
import {
  countGeminiTokens,
  embedContents,
  generateContent,
  GeminiStreamWire,
  validateBatchEmbed,
  validateEmbedContent,
  validateGeminiCountTokens,
  validateGenerateContent,
} from '../../operations/gemini';
import { geminiStatus } from '../../errorBodies';
import { callerOf } from '../httpCaller';
import { geminiErrors, geminiModelGet, geminiModelList } from '../gemini';

/**
 * The Gemini API (https://ai.google.dev/api) for any chat or embedding model: POST
 * /v1beta/models/{model}:generateContent, :streamGenerateContent (`?alt=sse`, else a streamed JSON array),
 * :countTokens, :embedContent and :batchEmbedContents; GET /v1beta/models and /v1beta/models/{model}. The key
 * comes as `x-goog-api-key`, `?key=` or the gateway's usual headers; errors use Google's shape
 * (`{"error": {"code", "message", "status"}}`). Chat models are translated to chat and back (src/operations/gemini/).
 */

/** `gemini-2.5-flash:generateContent` -> its model name and method. */
function splitSpec(ctx: Ctx, spec: string): { name: string; method: string } {
  const i = spec.lastIndexOf(':');
  if (i <= 0)
    throw new ApiError(
      404,
      `Unknown request URL: POST ${ctx.path.slice(0, 120)}.`,
      'invalid_request_error',
      null,
      'unknown_url',
    );
  return { name: spec.slice(0, i), method: spec.slice(i + 1) };
}

/** A Gemini upstream's error, its status and Google-shaped body kept, less any upstream names. */
function renderUpstreamError(ctx: Ctx, e: UpstreamHttpError, redact: (s: string) => string): void {
  let body: { error?: { code?: unknown; message?: unknown; status?: unknown } } | null = null;
  try {
    body = JSON.parse(redact(e.body));
  } catch {}
  ctx.status = e.status;
  for (const [k, v] of Object.entries(e.headers)) ctx.set(k, v);
  const err = body?.error;
  ctx.body =
    err && typeof err.message === 'string'
      ? body
      : {
          error: {
            code: e.status,
            message: redact(e.body.slice(0, 500)) || `upstream answered HTTP ${e.status}`,
            status: geminiStatus(e.status),
          },
        };
}

export function geminiRouter(deps: AppDeps): Router<GatewayState> {
  const r = new Router<GatewayState>();
  const auth = requireApiKey(deps);
  const body = jsonBody(deps.config.maxJsonBytes);

  async function generate(ctx: Ctx, name: string, stream: boolean): Promise<void> {
    const req = ctx.request.body as unknown;
    validateGenerateContent(req);
    const model = deps.catalog.require(name, 'chat');
    ctx.state.model = model.id;
    const g = req.generationConfig;
    if (g && typeof g.maxOutputTokens === 'number')
      g.maxOutputTokens = fitOutputCap(ctx, model, name, g.maxOutputTokens);
    const wire = stream ? new GeminiStreamWire(ctx.query.alt === 'sse') : null;
    try {
      await generateContent(callerOf(ctx, deps), deps, model, name, req, wire);
    } catch (e) {
      if (isUpstreamError(e, 'gemini')) return renderUpstreamError(ctx, e, redactorFor(deps.catalog));
      throw e;
    }
  }

  async function countTokens(ctx: Ctx, name: string): Promise<void> {
    const req = ctx.request.body as unknown;
    validateGeminiCountTokens(req);
    const model = deps.catalog.require(name, 'chat');
    ctx.state.model = model.id;
    try {
      await countGeminiTokens(callerOf(ctx, deps), deps, model, req);
    } catch (e) {
      if (isUpstreamError(e, 'gemini')) return renderUpstreamError(ctx, e, redactorFor(deps.catalog));
      throw e;
    }
  }

  async function embedding(ctx: Ctx, name: string, requests: EmbedContentBody[], batch: boolean): Promise<void> {
    const model = deps.catalog.require(name, 'embedding');
    ctx.state.model = model.id;
    try {
      await embedContents(callerOf(ctx, deps), deps, model, requests, batch);
    } catch (e) {
      if (isUpstreamError(e, 'gemini')) return renderUpstreamError(ctx, e, redactorFor(deps.catalog));
      throw e;
    }
  }

  const call = async (ctx: Ctx) => {
    const { name, method } = splitSpec(ctx, ctx.params.spec);
    switch (method) {
      case 'generateContent':
        return generate(ctx, name, false);
      case 'streamGenerateContent':
        return generate(ctx, name, true);
      case 'countTokens':
        return countTokens(ctx, name);
      case 'embedContent': {
        const req = ctx.request.body as unknown;
        validateEmbedContent(req);
        return embedding(ctx, name, [req], false);
      }
      case 'batchEmbedContents': {
        const req = ctx.request.body as unknown;
        validateBatchEmbed(req);
        return embedding(ctx, name, req.requests, true);
      }
      default:
        throw badRequest(
          `Method ${method.slice(0, 60)} is not supported on models ` +
            '(generateContent, streamGenerateContent, countTokens, embedContent, batchEmbedContents).',
          null,
          'unknown_method',
        );
    }
  };
  // v1beta is the Gemini CLI's version; v1 the GenAI SDK's default (its GET /v1/models is in routers/models.ts).
  for (const v of ['v1beta', 'v1'])
    r.post(`/${v}/models/:spec`, route(`/${v}/models/:spec`), geminiErrors, auth, body, call);
  r.get('/v1beta/models', route('/v1beta/models'), geminiErrors, auth, (ctx) => {
    ctx.body = geminiModelList(deps.catalog, ctx.query);
  });
  r.get('/v1beta/models/:model', route('/v1beta/models/:model'), geminiErrors, auth, (ctx) => {
    ctx.body = geminiModelGet(deps.catalog, ctx.params.model);
  });
  return r;
}
