import Router from '@koa/router';
import type { AppDeps } from '../deps';
import { jsonApi, type GatewayState } from '../middleware';
import { validateEmbedding } from '../../schemas/embeddings';
import { embeddingTokensBound, tokensCost, tokensFromChars } from '../../billing/pricing';
import { usageFromJson } from '../../providers/openai';
import { callUpstream, clientAbortSignal, sendJsonBuffer } from '../upstream';
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
    const payload = JSON.stringify(body);
    const meter = await reserve(ctx, deps, model.id, 'embeddings', tokensCost(model.pricing, bound), bound);
    const res = await callUpstream(ctx, meter, {}, () => deps.providers.openai(model).postJson('/embeddings', payload, { signal: clientAbortSignal(ctx.res) }));
    if (!res) return;
    const usage = usageFromJson(res.body);
    // An upstream that reports no usage is billed by the delivered-text rule over the input.
    const tokens = usage ? Math.max(0, Math.ceil(Number(usage.prompt_tokens) || 0)) : tokensFromChars(bound);
    meter.settle(tokensCost(model.pricing, tokens), usage ? { prompt_tokens: tokens } : { prompt_tokens: tokens, estimated: 1 });
    setCostHeaders(ctx.res, meter);
    sendJsonBuffer(ctx, res.body);
  });
  return r;
}
