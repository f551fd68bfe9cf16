import Router from '@koa/router';
import type { AppDeps } from '../deps';
import { jsonApi, type GatewayState } from '../middleware';
import { validateEmbedding } from '../../schemas/embeddings';
import { embeddingTokensBound, tokensCost, tokensFromChars } from '../../billing/pricing';
import { usageFromJson } from '../../providers/openai';
import { callRouted, clientAbortSignal, RoutedPayload, sendJsonBuffer } from '../upstream';
import { boundOverCandidates } from '../../routing/bound';
import { reserve } from '../reserve';
import { setCostHeaders } from '../costReport';

/**
 * POST /v1/embeddings (spec 4.11): string or array input, encoding_format float or base64 (little-endian float32,
 * produced by the upstream), dimensions. The upstream's answer is returned byte for byte; its usage is billed.
 */
export function embeddingsRouter(deps: AppDeps): Router<GatewayState> {
  const r = new Router<GatewayState>();
  r.post('/v1/embeddings', jsonApi(deps, '/v1/embeddings', deps.config.maxJsonBytes), async (ctx) => {
    const body = ctx.request.body;
    validateEmbedding(body);
    const model = deps.catalog.require(body.model, 'embedding');
    ctx.state.model = model.id;
    const bound = embeddingTokensBound(body.input);
    body.model = model.upstreamModel;
    const payloads = new RoutedPayload(body);
    const maxCost = boundOverCandidates(deps.catalog, deps.router, model, (m) => ({ maxCost: tokensCost(m.pricing, bound) })).maxCost;
    const meter = await reserve(ctx, deps, model.id, 'embeddings', maxCost, bound);
    const signal = clientAbortSignal(ctx.res);
    const answer = await callRouted(ctx, deps.router, model, meter, {}, (t) => deps.providers.openaiFor(t.deployment).postJson('/embeddings', payloads.for(t), { signal }));
    if (!answer) return;
    const res = answer.value;
    const usage = usageFromJson(res.body);
    // An upstream that reports no usage is billed by the delivered-text rule over the input.
    const tokens = usage ? Math.max(0, Math.ceil(Number(usage.prompt_tokens) || 0)) : tokensFromChars(bound);
    meter.settle(tokensCost(answer.model.pricing, tokens), usage ? { prompt_tokens: tokens } : { prompt_tokens: tokens, estimated: 1 });
    setCostHeaders(ctx.res, meter);
    sendJsonBuffer(ctx, res.body);
  });
  return r;
}
