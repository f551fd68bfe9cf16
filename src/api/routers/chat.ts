import type Router from '@koa/router';
import type { AppDeps } from '../../operations';
import type { Ctx, GatewayState } from '../middleware';
import { apiRoutes } from '../route';
import { fitOutputCap } from '../../catalog';
import type { ModelConfig } from '../../catalog';
import { chatCompletions, completions, validateChatCompletion, validateCompletion } from '../../operations/chat';
import { callerOf } from '../httpCaller';

/**
 * POST /v1/chat/completions and POST /v1/completions: validate, find the model, lower an aliased request's output
 * cap, then the operation (src/operations/chat/) answers.
 */
export function chatRouter(deps: AppDeps): Router<GatewayState> {
  const api = apiRoutes(deps, { shape: 'openai' });

  function modelOf(
    ctx: Ctx,
    kind: 'chat' | 'completion',
    body: { model: string; max_tokens?: number | null; max_completion_tokens?: number | null },
  ): ModelConfig {
    const model = deps.catalog.require(body.model, kind);
    ctx.state.model = model.id;
    for (const param of ['max_completion_tokens', 'max_tokens'] as const) {
      if (typeof body[param] === 'number') body[param] = fitOutputCap(ctx, model, body.model, body[param]);
    }
    return model;
  }

  api.add({
    method: 'POST',
    path: '/v1/chat/completions',
    body: { json: deps.config.maxJsonBytes },
    validate: validateChatCompletion,
    handler: async (ctx, body) => {
      const model = modelOf(ctx, 'chat', body);
      await chatCompletions(callerOf(ctx, deps), deps, model, body);
    },
  });

  api.add({
    method: 'POST',
    path: '/v1/completions',
    body: { json: deps.config.maxJsonBytes },
    validate: validateCompletion,
    handler: async (ctx, body) => {
      const model = modelOf(ctx, 'completion', body);
      await completions(callerOf(ctx, deps), deps, model, body);
    },
  });
  return api.router;
}
