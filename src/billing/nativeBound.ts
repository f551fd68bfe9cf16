import type { ModelConfig } from '../catalog/catalog';
import { IMAGE_PART_TOKENS, promptTokensBound, tokensBoundCost } from './pricing';

/**
 * Billing rules shared by /v1/messages and /v1/responses, the same as chat: reserve an upper bound before the
 * upstream call (prompt tokens <= request bytes, plus a fixed allowance per image; output <= the max tokens
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
  images: number,
): { maxCost: number; maxTokens: number } {
  const input = promptTokensBound(model, payloadBytes, images * IMAGE_PART_TOKENS);
  return { maxCost: tokensBoundCost(model.pricing, input, maxOutput), maxTokens: input + maxOutput };
}

/** Counts image / document blocks anywhere in a JSON value (messages or input items). */
export function countImages(v: unknown, depth = 0): number {
  if (depth > 8 || v === null || typeof v !== 'object') return 0;
  if (Array.isArray(v)) return v.reduce((n: number, x) => n + countImages(x, depth + 1), 0);
  const o = v as Record<string, unknown>;
  let n = o.type === 'image' || o.type === 'document' || o.type === 'input_image' || o.type === 'input_file' ? 1 : 0;
  for (const k of ['content', 'output']) if (Array.isArray(o[k])) n += countImages(o[k], depth + 1);
  return n;
}
