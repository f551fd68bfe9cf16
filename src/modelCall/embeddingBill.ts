import { tokensCost, tokensFromChars } from '../billing';
import { usageFromJson } from '../providers';
import type { RoutedCall } from './routedCall';

/**
 * Settles an embeddings call: the upstream's count when it is a finite number (a hostile 1e400 must not reach the
 * cost's BigInt); an upstream that reports none (a Gemini upstream's vectors never do) is billed by the
 * delivered-text rule over the input's bound (estimateEmbeddings' maxTokens). Returns the tokens billed.
 */
export function settleEmbeddings(call: RoutedCall, answer: Buffer | number[][], inputBound: number): number {
  const usage = Buffer.isBuffer(answer) ? usageFromJson(answer) : null;
  const reported = Number(usage?.prompt_tokens);
  const counted = usage !== null && Number.isFinite(reported);
  const tokens = counted
    ? Math.min(Number.MAX_SAFE_INTEGER, Math.max(0, Math.ceil(reported)))
    : tokensFromChars(inputBound);
  call.settleCost(
    tokensCost(call.pricing, tokens),
    counted ? { prompt_tokens: tokens } : { prompt_tokens: tokens, estimated: 1 },
  );
  return tokens;
}
