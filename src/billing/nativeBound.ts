import type { ModelConfig } from '../catalog';
import { promptTokensBound, tokensBoundCost } from './pricing';
import { mediaParts, mediaTokens, type MediaPart } from './imageTokens';

/**
 * Billing rules shared by /v1/messages and /v1/responses, the same as chat: reserve an upper bound before the
 * upstream call (prompt tokens <= request bytes, plus each image at its provider's rule; output <= the max tokens
 * asked for), then settle the upstream's reported usage, or, for a stream cut short or without usage, an
 * estimate of what was delivered (ceil(chars / 4)), never zero for a stream the upstream accepted.
 */

/**
 * Reservation for a native pass-through request of `payloadBytes` with up to `maxOutput` output tokens, and its
 * token count (input + output: what the key's tokens-per-minute window is charged until settlement).
 */
export function nativeBound(
  model: ModelConfig,
  payloadBytes: number,
  maxOutput: number,
  images: readonly MediaPart[] | number,
): { maxCost: number; maxTokens: number } {
  const input = promptTokensBound(model, payloadBytes, mediaTokens(model, images));
  return { maxCost: tokensBoundCost(model.pricing, input, maxOutput), maxTokens: input + maxOutput };
}

/** The image, audio, file and document parts anywhere in messages or input items (priced per model by nativeBound). */
export function countImages(v: unknown): MediaPart[] {
  return mediaParts(v);
}
