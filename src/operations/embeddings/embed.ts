import type { Caller, OperationDeps } from '../caller';
import type { ModelConfig } from '../../catalog/catalog';
import type { EmbeddingBody } from '../../schemas/embeddings';
import { embeddingTokensBound, tokensCost, tokensFromChars } from '../../billing/pricing';
import { usageFromJson } from '../../providers/openai/adapter';
import { asOpenAIError } from '../../providers/upstreamError';
import { boundOverCandidates } from '../../routing/bound';
import { geminiEmbedder, servedNatively } from '../../providers/kinds';
import { openCall, RoutedPayload } from '../routedCall';
import { geminiEmbedCall, openAIEmbeddingList, type GeminiEmbedCall } from './geminiUpstream';
import { throughCache } from '../../cache';

/** An upstream's embeddings: OpenAI's JSON as it came, or a Gemini upstream's vectors (which come without usage). */
export type EmbedAnswer = Buffer | number[][];

/**
 * POST /v1/embeddings: the input's token bound reserved at the most expensive model that may answer,
 * the upstream's answer returned byte for byte (float or base64 vectors, as it produced them), its usage billed.
 * A deployment of a `gemini` provider gets the input as embedContent / batchEmbedContents (`native`: the Gemini
 * routes' own requests, forwarded as sent).
 */
export async function embed(
  caller: Caller,
  deps: OperationDeps,
  model: ModelConfig,
  body: EmbeddingBody,
  render?: (answer: EmbedAnswer) => unknown,
  operation = 'embeddings',
  native?: GeminiEmbedCall,
): Promise<void> {
  // POST /v1/embeddings goes through the response cache; the Gemini routes' embeddings (render, native) do not.
  if (render || native) return embedNow(caller, deps, model, body, render, operation, native);
  return throughCache(caller, deps, { operation, model, body: body as unknown as Record<string, unknown> }, (c) =>
    embedNow(c, deps, model, body, undefined, operation),
  );
}

async function embedNow(
  caller: Caller,
  deps: OperationDeps,
  model: ModelConfig,
  body: EmbeddingBody,
  render: ((answer: EmbedAnswer) => unknown) | undefined,
  operation: string,
  native?: GeminiEmbedCall,
): Promise<void> {
  const bound = embeddingTokensBound(body.input);
  body.model = model.upstreamModel;
  // Input a Gemini upstream cannot take is refused before anything is reserved.
  let gemini =
    native ?? (servedNatively(deps.catalog.provider(model).kind, model, 'gemini') ? geminiEmbedCall(body) : null);
  const payloads = new RoutedPayload(body);
  const maxCost = boundOverCandidates(deps.catalog, deps.router, model, (m) => ({
    maxCost: tokensCost(m.pricing, bound),
  })).maxCost;
  const call = await openCall(caller, deps, model, operation, maxCost, bound);
  const res = await call.run(async (t): Promise<EmbedAnswer> => {
    const adapter = geminiEmbedder(deps.providers.forDeployment(t.deployment));
    if (!adapter)
      return (await deps.providers.openaiFor(t.deployment).postJson('/embeddings', payloads.for(t), call.tryOptions))
        .body;
    gemini ??= geminiEmbedCall(body);
    const vectors = adapter.embed(t.deployment.upstreamModel, gemini.requests, gemini.batch, call.tryOptions);
    // The Gemini routes render a Gemini upstream's error as it came; /v1/embeddings in OpenAI's shape.
    return native ? vectors : vectors.catch((e: unknown) => Promise.reject(asOpenAIError(e)));
  });
  const usage = Buffer.isBuffer(res) ? usageFromJson(res) : null;
  // The upstream's count when it is a finite number (a hostile 1e400 must not reach the cost's BigInt); an upstream
  // that reports none is billed by the delivered-text rule over the input.
  const reported = Number(usage?.prompt_tokens);
  const counted = usage !== null && Number.isFinite(reported);
  const tokens = counted ? Math.min(Number.MAX_SAFE_INTEGER, Math.max(0, Math.ceil(reported))) : tokensFromChars(bound);
  call.settleCost(
    tokensCost(call.pricing, tokens),
    counted ? { prompt_tokens: tokens } : { prompt_tokens: tokens, estimated: 1 },
  );
  call.setCostHeaders();
  // Another interface's shape (Gemini's embedContent) is rendered from the upstream's answer.
  if (render) caller.out.json(render(res));
  else if (Buffer.isBuffer(res)) caller.out.bytes(res);
  else caller.out.json(openAIEmbeddingList(res, call.answered.id, body.encoding_format === 'base64', tokens));
}
