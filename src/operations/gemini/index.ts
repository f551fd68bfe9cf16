import type { Caller, OperationDeps } from '../../modelCall';
import type { ModelConfig } from '../../catalog';
import type { CountTokensBody } from '../../schemas';
import type { GenerateContentRequest } from '../../translate';
import { servedNatively } from '../../providers';
import { countTokensEstimate } from './countTokens';
import { nativeGenerate } from './native';
import { translatedGenerate } from './translated';
import type { GeminiStreamWire } from './streamWire';
import { geminiUpstreamOf } from '../../modelCall';

/**
 * The Gemini API's methods on a model, without HTTP: generateContent / streamGenerateContent (on a `gemini`
 * provider passed through natively, ./native.ts; elsewhere translated to chat and back, ./translated.ts),
 * countTokens, and embedContent / batchEmbedContents (./embed.ts).
 */

export {
  validateBatchEmbed,
  validateEmbedContent,
  validateGeminiCountTokens,
  validateGenerateContent,
} from '../../schemas';
export { embedContents } from './embed';
export { GeminiStreamWire } from './streamWire';

/** `name`: the model as the client named it (the answer's modelVersion); `wire`: a stream's framing (null: whole). */
export async function generateContent(
  caller: Caller,
  deps: OperationDeps,
  model: ModelConfig,
  name: string,
  req: GenerateContentRequest,
  wire: GeminiStreamWire | null,
): Promise<void> {
  const call = { model, name, req, wire };
  const r = req as { cachedContent?: unknown; systemInstruction?: unknown; contents?: unknown };
  caller.promptCache = { cacheKey: r.cachedContent, prompt: [r.systemInstruction, r.contents] };
  if (servedNatively(deps.catalog.provider(model).kind, model, 'gemini')) await nativeGenerate(caller, deps, call);
  else await translatedGenerate(caller, deps, call);
}

/** The upstream's count on a `gemini` provider; elsewhere the estimate (./countTokens.ts). */
export async function countGeminiTokens(
  caller: Caller,
  deps: OperationDeps,
  model: ModelConfig,
  req: CountTokensBody,
): Promise<void> {
  const native = servedNatively(deps.catalog.provider(model).kind, model, 'gemini')
    ? geminiUpstreamOf(deps, model)
    : undefined;
  if (!native) {
    caller.out.json({ totalTokens: countTokensEstimate(req) });
    return;
  }
  caller.out.raw(await native.callWhole(model.upstreamModel, 'countTokens', JSON.stringify(req)));
}
