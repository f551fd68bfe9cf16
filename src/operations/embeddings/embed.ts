import type { Caller, OperationDeps } from '../../modelCall';
import type { ModelConfig } from '../../catalog';
import type { EmbeddingBody } from '../../schemas';
import { asOpenAIError, servedNatively } from '../../providers';
import { embeddingsUpstream, estimateEmbeddings, openCall, RoutedPayload, settleEmbeddings } from '../../modelCall';
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
  const estimate = estimateEmbeddings(deps, model, body.input);
  body.model = model.upstreamModel;
  // Input a Gemini upstream cannot take is refused before anything is reserved.
  let gemini =
    native ?? (servedNatively(deps.catalog.provider(model).kind, model, 'gemini') ? geminiEmbedCall(body) : null);
  const payloads = new RoutedPayload(body);
  const call = await openCall(caller, deps, model, operation, estimate);
  const res = await call.attempt(embeddingsUpstream, async (a, t): Promise<EmbedAnswer> => {
    if (!a.gemini) return (await a.openai.postJson('/embeddings', payloads.for(t), call.tryOptions)).body;
    gemini ??= geminiEmbedCall(body);
    const vectors = a.gemini.embed(t.deployment.upstreamModel, gemini.requests, gemini.batch, call.tryOptions);
    // The Gemini routes render a Gemini upstream's error as it came; /v1/embeddings in OpenAI's shape.
    return native ? vectors : vectors.catch((e: unknown) => Promise.reject(asOpenAIError(e)));
  });
  // The upstream's count, or the delivered-text rule over the input when it reports none.
  const tokens = settleEmbeddings(call, res, estimate.maxTokens);
  call.setCostHeaders();
  // Another interface's shape (Gemini's embedContent) is rendered from the upstream's answer.
  if (render) caller.out.json(render(res));
  else if (Buffer.isBuffer(res)) caller.out.bytes(res);
  else caller.out.json(openAIEmbeddingList(res, call.answered.id, body.encoding_format === 'base64', tokens));
}
