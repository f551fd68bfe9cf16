import { badRequest } from '../errors';
import type { ModelConfig } from './catalog';

/** Response header saying an output cap was lowered: `<requested>-><cap>`. */
export const CLAMPED_HEADER = 'x-gateway-max-tokens-clamped';

/**
 * An output-token count above the model's cap is the client's error, as the upstream would answer it (OpenAI and
 * Anthropic both refuse with a 400); checked before the funds reservation, which it would otherwise inflate.
 */
export function checkOutputCap(model: ModelConfig, param: string, value: number | null | undefined): void {
  const cap = model.maxOutputTokens;
  if (cap && typeof value === 'number' && value > cap) {
    throw badRequest(
      `${param} is too large: ${value}. This model supports at most ${cap} completion tokens.`,
      param,
      'invalid_value',
    );
  }
}

/** Where the response header goes (Koa's context). */
export interface HeaderTarget {
  set(name: string, value: string): void;
}

/**
 * The output cap a request runs with. A client that reached the model by an alias or a pattern asked for what its
 * own model allows (Claude Code asks up to 128k), so a value above the model's cap is lowered to it and the
 * response says so in CLAMPED_HEADER. A request naming the model by its id is left as sent (each path then treats
 * it as it always has: the native paths refuse it with the upstream's 400).
 */
export function fitOutputCap<T extends number | null | undefined>(
  res: HeaderTarget,
  model: ModelConfig,
  name: string,
  value: T,
): T | number {
  const cap = model.maxOutputTokens;
  if (name === model.id || !cap || typeof value !== 'number' || value <= cap) return value;
  res.set(CLAMPED_HEADER, `${value}->${cap}`);
  return cap;
}
