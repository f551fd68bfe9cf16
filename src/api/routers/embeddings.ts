import Router from '@koa/router';
import type { AppDeps } from '../../operations';
import { jsonApi, type GatewayState } from '../middleware';
import { embed, validateEmbedding } from '../../operations/embeddings';
import { callerOf } from '../httpCaller';

/**
 * POST /v1/embeddings: string or array input, encoding_format float or base64, dimensions; validate, find the
 * model, then src/operations/embeddings/embed.ts bills, calls and answers.
 */
export function embeddingsRouter(deps: AppDeps): Router<GatewayState> {
  const r = new Router<GatewayState>();
  r.post('/v1/embeddings', jsonApi(deps, '/v1/embeddings', deps.config.maxJsonBytes), async (ctx) => {
    const body = ctx.request.body;
    validateEmbedding(body);
    const model = deps.catalog.require(body.model, 'embedding');
    ctx.state.model = model.id;
    await embed(callerOf(ctx, deps), deps, model, body);
  });
  return r;
}
