import type Router from '@koa/router';
import type { AppDeps } from '../../operations';
import type { GatewayState } from '../middleware';
import { apiRoutes } from '../route';
import { embed, validateEmbedding } from '../../operations/embeddings';
import { callerOf } from '../httpCaller';

/**
 * POST /v1/embeddings: string or array input, encoding_format float or base64, dimensions; validate, find the
 * model, then src/operations/embeddings/embed.ts bills, calls and answers.
 */
export function embeddingsRouter(deps: AppDeps): Router<GatewayState> {
  return apiRoutes(deps, { shape: 'openai' }).add({
    method: 'POST',
    path: '/v1/embeddings',
    body: { json: deps.config.maxJsonBytes },
    validate: validateEmbedding,
    handler: async (ctx, body) => {
      const model = deps.catalog.require(body.model, 'embedding');
      ctx.state.model = model.id;
      await embed(callerOf(ctx, deps), deps, model, body);
    },
  }).router;
}
