import Router from '@koa/router';
import type { AppDeps } from '../../operations/deps';
import { jsonApi, type Ctx, type GatewayState } from '../middleware';
import { validateChatCompletion, validateCompletion, type ChatCompletionBody } from '../../schemas/chat';
import { bridgedChat } from '../chat/bridged';
import { forwardCompletion, type CompletionBody } from '../chat/forward';
import type { ModelConfig } from '../../catalog/catalog';
import { checkOutputCap, fitOutputCap } from '../../catalog/outputCap';
import { servedNatively } from '../../providers/kinds';

function checkMaxTokens(
  model: ModelConfig,
  body: { max_tokens?: number | null; max_completion_tokens?: number | null },
): void {
  for (const param of ['max_completion_tokens', 'max_tokens'] as const) checkOutputCap(model, param, body[param]);
}

/**
 * POST /v1/chat/completions and POST /v1/completions: validate, find the model, then forward to its
 * OpenAI-compatible upstream (src/api/chat/forward.ts) or, for chat on another protocol, through a bridge
 * (src/api/chat/bridged.ts). Unknown fields pass through to the upstream.
 */
export function chatRouter(deps: AppDeps): Router<GatewayState> {
  const r = new Router<GatewayState>();

  async function handle(ctx: Ctx, kind: 'chat' | 'completion', body: CompletionBody): Promise<void> {
    const model = deps.catalog.require(body.model, kind);
    ctx.state.model = model.id;
    for (const param of ['max_completion_tokens', 'max_tokens'] as const) {
      if (typeof body[param] === 'number') body[param] = fitOutputCap(ctx, model, body.model, body[param]);
    }
    checkMaxTokens(model, body);
    // Chat models on another protocol go through the bridges /v1/messages and /v1/responses use.
    if (kind === 'chat' && !servedNatively(deps.catalog.provider(model).kind, model, 'chat'))
      return bridgedChat(ctx, deps, model, body as ChatCompletionBody);
    await forwardCompletion(ctx, deps, kind, model, body);
  }

  r.post('/v1/chat/completions', jsonApi(deps, '/v1/chat/completions', deps.config.maxJsonBytes), async (ctx) => {
    const body = ctx.request.body;
    validateChatCompletion(body);
    await handle(ctx, 'chat', body);
  });

  r.post('/v1/completions', jsonApi(deps, '/v1/completions', deps.config.maxJsonBytes), async (ctx) => {
    const body = ctx.request.body;
    validateCompletion(body);
    await handle(ctx, 'completion', body);
  });
  return r;
}
