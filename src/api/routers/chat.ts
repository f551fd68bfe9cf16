import Router from '@koa/router';
import type { AppDeps } from '../deps';
import { jsonApi, type Ctx, type GatewayState } from '../middleware';
import { validateChatCompletion, validateCompletion, type ChatCompletionBody } from '../../schemas/chat';
import { bridgedChat } from '../chat/bridged';
import { estimateChatMaxCost } from '../../billing/pricing';
import type { ModelConfig } from '../../catalog/catalog';
import { checkOutputCap } from '../../catalog/outputCap';
import { forwardCompletionJson, forwardCompletionStream, RoutedPayload, type UpstreamTry } from '../upstream';
import { boundOverCandidates } from '../../routing/bound';
import type { RouteTry } from '../../routing/modelRouter';
import { reserve } from '../reserve';

function checkMaxTokens(model: ModelConfig, body: { max_tokens?: number | null; max_completion_tokens?: number | null }): void {
  for (const param of ['max_completion_tokens', 'max_tokens'] as const) checkOutputCap(model, param, body[param]);
}

/**
 * POST /v1/chat/completions and POST /v1/completions: validate, route by model, reserve the upper-bound cost,
 * forward (JSON or SSE), settle on the upstream's usage. Unknown fields pass through to the upstream.
 */
export function chatRouter(deps: AppDeps): Router<GatewayState> {
  const r = new Router<GatewayState>();

  async function handle(ctx: Ctx, kind: 'chat' | 'completion', body: { model: string; stream?: boolean | null; stream_options?: { include_usage?: boolean } | null; max_tokens?: number | null; max_completion_tokens?: number | null }): Promise<void> {
    const model = deps.catalog.require(body.model, kind);
    ctx.state.model = model.id;
    checkMaxTokens(model, body);
    // Chat models on an Anthropic or a Responses-only upstream go through the bridges /v1/messages and /v1/responses use.
    if (kind === 'chat' && (model.api === 'responses' || deps.providers.get(model.provider)?.kind !== 'openai')) return bridgedChat(ctx, deps, model, body as ChatCompletionBody);
    // Resolved before funds are reserved: a misconfigured provider is refused with nothing held.
    deps.providers.openai(model);
    const stream = body.stream === true;
    const clientWantsUsage = stream && body.stream_options?.include_usage === true;
    // The body is ours (parsed per request): rewrite it in place rather than copy it.
    body.model = model.upstreamModel;
    if (stream) body.stream_options = body.stream_options ? { ...body.stream_options, include_usage: true } : { include_usage: true };
    const payloads = new RoutedPayload(body);
    const payloadBytes = Buffer.byteLength(payloads.payload);
    // Reserved once, for the most expensive model and deployment that may answer (retries and fallbacks included).
    const bound = boundOverCandidates(deps.catalog, deps.router, model, (m, extra) => estimateChatMaxCost(m, body, payloadBytes + extra));
    const meter = await reserve(ctx, deps, model.id, kind === 'chat' ? 'chat.completions' : 'completions', bound.maxCost, bound.promptTokens + bound.outputTokens);
    const path = kind === 'chat' ? '/chat/completions' : '/completions';
    const prepare = (t: RouteTry): UpstreamTry => ({ adapter: deps.providers.openaiFor(t.deployment), payload: payloads.for(t) });
    if (stream) await forwardCompletionStream(ctx, deps.router, model, path, prepare, payloadBytes, meter, { kind, clientWantsUsage });
    else await forwardCompletionJson(ctx, deps.router, model, path, prepare, payloadBytes, meter);
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
