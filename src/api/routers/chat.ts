import Router from '@koa/router';
import type { AppDeps } from '../../operations';
import { jsonApi, type Ctx, type GatewayState } from '../middleware';
import { fitOutputCap } from '../../catalog';
import type { ModelConfig } from '../../catalog';
import { chatCompletions, completions, validateChatCompletion, validateCompletion } from '../../operations/chat';
import { callerOf } from '../httpCaller';

/**
 * POST /v1/chat/completions and POST /v1/completions: validate, find the model, lower an aliased request's output
 * cap, then the operation (src/operations/chat/) answers.
 */
export function chatRouter(deps: AppDeps): Router<GatewayState> {
  const r = new Router<GatewayState>();

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

  r.post('/v1/chat/completions', jsonApi(deps, '/v1/chat/completions', deps.config.maxJsonBytes), async (ctx) => {
    const body = ctx.request.body;
    validateChatCompletion(body);
    const model = modelOf(ctx, 'chat', body);
    await chatCompletions(callerOf(ctx, deps), deps, model, body);
  });

  r.post('/v1/completions', jsonApi(deps, '/v1/completions', deps.config.maxJsonBytes), async (ctx) => {
    const body = ctx.request.body;
    validateCompletion(body);
    const model = modelOf(ctx, 'completion', body);
    await completions(callerOf(ctx, deps), deps, model, body);
  });
  return r;
}
