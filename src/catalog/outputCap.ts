import { badRequest } from '../errors';
import type { ModelConfig } from './catalog';

/**
 * An output-token count above the model's cap is the client's error, as the upstream would answer it (OpenAI and
 * Anthropic both refuse with a 400); checked before the funds reservation, which it would otherwise inflate.
 */
export function checkOutputCap(model: ModelConfig, param: string, value: number | null | undefined): void {
  const cap = model.maxOutputTokens;
  if (cap && typeof value === 'number' && value > cap) {
    throw badRequest(`${param} is too large: ${value}. This model supports at most ${cap} completion tokens.`, param, 'invalid_value');
  }
}
