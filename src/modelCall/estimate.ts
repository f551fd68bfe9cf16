import type { Catalog, ModelConfig } from '../catalog';
import {
  DEFAULT_MAX_OUTPUT_TOKENS,
  embeddingTokensBound,
  estimateChatMaxCost,
  tokensCost,
  nativeBound,
} from '../billing';
import type { MediaPart } from '../billing';
import { boundOverCandidates } from './bound';
import type { ModelRouter } from './modelRouter';

/**
 * What a call may cost at most (VND, reserved when it opens: openCall), and the input + output tokens the key's
 * token window counts until it settles (absent: an operation not billed in tokens). Every estimate here covers
 * every candidate that may answer (deployments and fallbacks, src/modelCall/bound.ts), so a retry or a fallback
 * never needs more than was reserved.
 */
export interface Estimate {
  maxCost: number;
  maxTokens?: number;
}

/** What an estimate reads: the catalog's deployments and the router's candidates. */
export type EstimateDeps = { catalog: Catalog; router: ModelRouter };

/**
 * A native pass-through body of `bytes` (its media parts priced by each model's rule) with up to `maxOutput`
 * output tokens (absent: the model's cap, else the default).
 */
export function estimateNative(
  deps: EstimateDeps,
  model: ModelConfig,
  req: { bytes: number; maxOutput?: number | null; media: readonly MediaPart[] | number },
): Required<Estimate> {
  return boundOverCandidates(deps.catalog, deps.router, model, (m, extra) =>
    nativeBound(m, req.bytes + extra, req.maxOutput ?? m.maxOutputTokens ?? DEFAULT_MAX_OUTPUT_TOKENS, req.media),
  );
}

/** A chat or legacy completion body forwarded as `payloadBytes` (its `n`, `max_tokens` and the like read). */
export function estimateCompletion(
  deps: EstimateDeps,
  model: ModelConfig,
  body: Parameters<typeof estimateChatMaxCost>[1],
  payloadBytes: number,
): Required<Estimate> {
  const b = boundOverCandidates(deps.catalog, deps.router, model, (m, extra) =>
    estimateChatMaxCost(m, body, payloadBytes + extra),
  );
  return { maxCost: b.maxCost, maxTokens: b.promptTokens + b.outputTokens };
}

/** Embeddings of `input`: `maxTokens` is the input's token bound (the estimate settleEmbeddings falls back on). */
export function estimateEmbeddings(deps: EstimateDeps, model: ModelConfig, input: unknown): Required<Estimate> {
  const bound = embeddingTokensBound(input);
  const maxCost = boundOverCandidates(deps.catalog, deps.router, model, (m) => ({
    maxCost: tokensCost(m.pricing, bound),
  })).maxCost;
  return { maxCost, maxTokens: bound };
}
