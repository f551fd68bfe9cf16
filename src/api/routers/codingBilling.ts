import type { ModelConfig } from '../../catalog/catalog';
import type { Meter } from '../../billing/meter';
import { IMAGE_PART_TOKENS, promptTokensBound, tokensCost, tokensFromChars } from '../../billing/pricing';

/**
 * Billing rules shared by /v1/messages and /v1/responses, the same as chat: reserve an upper bound before the
 * upstream call (prompt tokens <= request bytes, plus a fixed allowance per image; output <= the max tokens
 * asked for), then settle the upstream's reported usage, or, for a stream cut short or without usage, an
 * estimate of what was delivered (ceil(chars / 4)), never zero for a stream the upstream accepted.
 */

export interface BilledUsage { input: number; output: number; cached?: number; estimated: boolean }

/** Reservation for a native pass-through request of `payloadBytes` with up to `maxOutput` output tokens. */
export function nativeMaxCost(model: ModelConfig, payloadBytes: number, maxOutput: number, images: number): number {
  return tokensCost(model.pricing, promptTokensBound(model, payloadBytes, images * IMAGE_PART_TOKENS), maxOutput);
}

export function settleUsage(meter: Meter, model: ModelConfig, u: BilledUsage, status = 200): number {
  const input = Math.max(0, Math.ceil(u.input));
  const output = Math.max(0, Math.ceil(u.output));
  const units: Record<string, number> = { prompt_tokens: input, completion_tokens: output };
  if (u.cached) units.cached_tokens = u.cached;
  if (u.estimated) units.estimated = 1;
  return meter.settle(tokensCost(model.pricing, input, output), units, status);
}

/** The delivered-output estimate when a stream ended without its usage. */
export function estimateFromDelivered(payloadBytes: number, deliveredChars: number, knownInput?: number, knownOutput?: number): BilledUsage {
  return {
    input: knownInput ?? tokensFromChars(payloadBytes),
    output: Math.max(knownOutput ?? 0, tokensFromChars(deliveredChars)),
    estimated: true,
  };
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
