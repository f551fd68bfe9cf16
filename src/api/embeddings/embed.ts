import type { AppDeps } from '../deps';
import type { Ctx } from '../middleware';
import type { ModelConfig } from '../../catalog/catalog';
import type { EmbeddingBody } from '../../schemas/embeddings';
import { embeddingTokensBound, tokensCost, tokensFromChars } from '../../billing/pricing';
import { usageFromJson } from '../../providers/openai';
import { boundOverCandidates } from '../../routing/bound';
import { callRouted, clientAbortSignal, RoutedPayload, sendJsonBuffer } from '../upstream';
import { reserve } from '../reserve';
import { setCostHeaders } from '../costReport';

/**
 * POST /v1/embeddings (spec 4.11): the input's token bound reserved at the most expensive model that may answer,
 * the upstream's answer returned byte for byte (float or base64 vectors, as it produced them), its usage billed.
 */
export async function embed(
  ctx: Ctx,
  deps: AppDeps,
  model: ModelConfig,
  body: EmbeddingBody,
  render?: (raw: Buffer) => unknown,
  operation = 'embeddings',
): Promise<void> {
  const bound = embeddingTokensBound(body.input);
  body.model = model.upstreamModel;
  const payloads = new RoutedPayload(body);
  const maxCost = boundOverCandidates(deps.catalog, deps.router, model, (m) => ({
    maxCost: tokensCost(m.pricing, bound),
  })).maxCost;
  const meter = await reserve(ctx, deps, model.id, operation, maxCost, bound);
  const signal = clientAbortSignal(ctx.res);
  const answer = await callRouted(ctx, deps.router, model, meter, {}, (t) =>
    deps.providers.openaiFor(t.deployment).postJson('/embeddings', payloads.for(t), { signal }),
  );
  if (!answer) return;
  const res = answer.value;
  const usage = usageFromJson(res.body);
  // An upstream that reports no usage is billed by the delivered-text rule over the input.
  const tokens = usage ? Math.max(0, Math.ceil(Number(usage.prompt_tokens) || 0)) : tokensFromChars(bound);
  meter.settle(
    tokensCost(answer.model.pricing, tokens),
    usage ? { prompt_tokens: tokens } : { prompt_tokens: tokens, estimated: 1 },
  );
  setCostHeaders(ctx.res, meter);
  // Another interface's shape (Gemini's embedContent) is rendered from the upstream's answer.
  if (render) ctx.body = render(res.body);
  else sendJsonBuffer(ctx, res.body);
}
