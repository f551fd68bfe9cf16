import type { Pricing } from '../catalog';
import { perMillionCost, tokensFromChars } from './pricing';

/**
 * What a token-billed request is charged for, read from each provider's own usage fields and priced field by field:
 * uncached input at inputPer1MTokens, cache reads at cachedInputPer1MTokens, cache writes at cacheWrite5mPer1MTokens
 * or cacheWrite1hPer1MTokens (Anthropic's cache creation, by TTL), output at outputPer1MTokens, except its reasoning
 * part at reasoningPer1MTokens and audio at audioInput/audioOutputPer1MTokens where the catalog gives them. A request
 * whose prompt exceeds 200,000 tokens is billed whole at the model's `above200kTokens` prices where it has them.
 * A cache price the catalog does not give is the input price (what the upstream bills without a discount).
 * The cost is the sum, rounded up to a whole VND once.
 *
 * Provider shapes:
 * - OpenAI chat: prompt_tokens includes prompt_tokens_details.cached_tokens; completion_tokens includes
 *   completion_tokens_details.reasoning_tokens. The gateway's bridges add prompt_tokens_details.cache_write_tokens
 *   (and cache_write_1h_tokens, the part written for 1 hour) when an Anthropic upstream wrote to its cache.
 * - Anthropic: input_tokens excludes cache reads (cache_read_input_tokens) and writes (cache_creation_input_tokens,
 *   split by TTL in cache_creation.ephemeral_5m_input_tokens / ephemeral_1h_input_tokens).
 * - Responses: input_tokens includes input_tokens_details.cached_tokens; output_tokens includes
 *   output_tokens_details.reasoning_tokens.
 */

export interface TokenUsage {
  /** Input tokens neither read from nor written to a prompt cache. */
  input: number;
  cacheRead: number;
  cacheWrite5m: number;
  cacheWrite1h: number;
  /** All output tokens, reasoning included. */
  output: number;
  /** The reasoning part of `output` (priced apart only where the catalog has a reasoning price). */
  reasoning: number;
  /** The audio part of `input` (uncached) and of `output`; absent when none. */
  audioInput?: number;
  audioOutput?: number;
  /** No upstream usage arrived: the delivered-text estimate. */
  estimated: boolean;
}

const n = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) && v > 0 ? Math.ceil(v) : 0);

export function tokenUsage(t: Partial<TokenUsage>): TokenUsage {
  const input = n(t.input);
  const output = n(t.output);
  const audioInput = Math.min(input, n(t.audioInput));
  const audioOutput = Math.min(output, n(t.audioOutput));
  return {
    input,
    cacheRead: n(t.cacheRead),
    cacheWrite5m: n(t.cacheWrite5m),
    cacheWrite1h: n(t.cacheWrite1h),
    output,
    reasoning: n(t.reasoning),
    ...(audioInput ? { audioInput } : {}),
    ...(audioOutput ? { audioOutput } : {}),
    estimated: t.estimated === true,
  };
}

/** No upstream usage: prompt tokens = ceil(request bytes / 4), output tokens = ceil(delivered characters / 4). */
export function estimatedUsage(payloadBytes: number, deliveredChars: number): TokenUsage {
  return tokenUsage({ input: tokensFromChars(payloadBytes), output: tokensFromChars(deliveredChars), estimated: true });
}

/** All input tokens (uncached, cache reads and cache writes): OpenAI's prompt_tokens. */
export function promptTokens(t: TokenUsage): number {
  return t.input + t.cacheRead + t.cacheWrite5m + t.cacheWrite1h;
}

export interface ChatUsageLike {
  prompt_tokens?: unknown;
  completion_tokens?: unknown;
  prompt_tokens_details?: {
    cached_tokens?: unknown;
    cache_write_tokens?: unknown;
    cache_write_1h_tokens?: unknown;
    audio_tokens?: unknown;
  } | null;
  completion_tokens_details?: { reasoning_tokens?: unknown; audio_tokens?: unknown } | null;
}

/** OpenAI chat/completions usage (also legacy completions and embeddings, which have no details). */
export function fromChatUsage(u: ChatUsageLike): TokenUsage {
  const d = u.prompt_tokens_details ?? {};
  const prompt = n(u.prompt_tokens);
  const cacheRead = Math.min(prompt, n(d.cached_tokens));
  const writes = Math.min(prompt - cacheRead, n(d.cache_write_tokens));
  const write1h = Math.min(writes, n(d.cache_write_1h_tokens));
  return tokenUsage({
    input: prompt - cacheRead - writes,
    cacheRead,
    cacheWrite5m: writes - write1h,
    cacheWrite1h: write1h,
    output: n(u.completion_tokens),
    reasoning: n(u.completion_tokens_details?.reasoning_tokens),
    // OpenAI counts audio inside prompt_tokens; the cached part of a prompt is billed as a cache read whatever it is.
    audioInput: Math.min(prompt - cacheRead - writes, n(d.audio_tokens)),
    audioOutput: n(u.completion_tokens_details?.audio_tokens),
  });
}

export interface AnthropicUsageLike {
  input_tokens?: unknown;
  output_tokens?: unknown;
  cache_read_input_tokens?: unknown;
  cache_creation_input_tokens?: unknown;
  cache_creation?: { ephemeral_5m_input_tokens?: unknown; ephemeral_1h_input_tokens?: unknown } | null;
}

/** Anthropic Messages usage; cache creation without its TTL split counts as 5-minute writes (the default TTL). */
export function fromAnthropicUsage(u: AnthropicUsageLike): TokenUsage {
  const created = n(u.cache_creation_input_tokens);
  const split = u.cache_creation;
  const write1h = split ? Math.min(created, n(split.ephemeral_1h_input_tokens)) : 0;
  return tokenUsage({
    input: n(u.input_tokens),
    cacheRead: n(u.cache_read_input_tokens),
    cacheWrite5m: created - write1h,
    cacheWrite1h: write1h,
    output: n(u.output_tokens),
  });
}

export interface ResponsesUsageLike {
  input_tokens?: unknown;
  output_tokens?: unknown;
  input_tokens_details?: {
    cached_tokens?: unknown;
    cache_write_tokens?: unknown;
    cache_write_1h_tokens?: unknown;
  } | null;
  output_tokens_details?: { reasoning_tokens?: unknown } | null;
}

/** OpenAI Responses usage. */
export function fromResponsesUsage(u: ResponsesUsageLike): TokenUsage {
  return fromChatUsage({
    prompt_tokens: u.input_tokens,
    completion_tokens: u.output_tokens,
    prompt_tokens_details: u.input_tokens_details,
    completion_tokens_details: u.output_tokens_details,
  });
}

/** Prompts above this many tokens are billed at a model's `above200kTokens` prices. */
export const LONG_CONTEXT_TOKENS = 200_000;

/** The prices a request of `prompt` input tokens is billed at: the long-context tier over the base, where given. */
export function tierPricing(p: Pricing, prompt: number): Pricing {
  return prompt > LONG_CONTEXT_TOKENS && p.above200kTokens ? { ...p, ...p.above200kTokens } : p;
}

/** Each usage field at its own price, summed, rounded up once (exact integer arithmetic, see pricing.ts). */
export function usageCost(pricing: Pricing, t: TokenUsage): number {
  const p = tierPricing(pricing, promptTokens(t));
  const input = p.inputPer1MTokens ?? 0;
  const output = p.outputPer1MTokens ?? 0;
  // Reasoning and audio are parts of output (audio never reasoning): each part once, the rest at the output price.
  const audioOut = Math.min(t.output, t.audioOutput ?? 0);
  const reasoning = Math.min(t.output - audioOut, t.reasoning);
  const audioIn = Math.min(t.input, t.audioInput ?? 0);
  return perMillionCost([
    [t.input - audioIn, input],
    [audioIn, p.audioInputPer1MTokens ?? input],
    [t.cacheRead, p.cachedInputPer1MTokens ?? input],
    [t.cacheWrite5m, p.cacheWrite5mPer1MTokens ?? input],
    [t.cacheWrite1h, p.cacheWrite1hPer1MTokens ?? input],
    [t.output - audioOut - reasoning, output],
    [reasoning, p.reasoningPer1MTokens ?? output],
    [audioOut, p.audioOutputPer1MTokens ?? output],
  ]);
}

/**
 * The usage record's units: prompt_tokens (all input) and completion_tokens (all output), and the
 * breakdown fields that are not zero: input_uncached_tokens (with any cache field), cache_read_tokens,
 * cache_write_5m_tokens, cache_write_1h_tokens, reasoning_tokens; `estimated: 1` for an estimate.
 */
export function usageUnits(t: TokenUsage): Record<string, number> {
  const u: Record<string, number> = { prompt_tokens: promptTokens(t), completion_tokens: t.output };
  if (t.cacheRead || t.cacheWrite5m || t.cacheWrite1h) u.input_uncached_tokens = t.input;
  if (t.cacheRead) u.cache_read_tokens = t.cacheRead;
  if (t.cacheWrite5m) u.cache_write_5m_tokens = t.cacheWrite5m;
  if (t.cacheWrite1h) u.cache_write_1h_tokens = t.cacheWrite1h;
  if (t.reasoning) u.reasoning_tokens = t.reasoning;
  if (t.audioInput) u.audio_input_tokens = t.audioInput;
  if (t.audioOutput) u.audio_output_tokens = t.audioOutput;
  if (t.estimated) u.estimated = 1;
  return u;
}

/** The token breakdown of a stored usage record (GET /v1/usage), whichever fields it was written with. */
export function breakdownOfUnits(units: Record<string, unknown>): {
  input_uncached: number;
  cache_read: number;
  cache_write_5m: number;
  cache_write_1h: number;
  output: number;
  reasoning: number;
  /** Only where the model counted audio tokens. */
  audio_input?: number;
  audio_output?: number;
} | null {
  if (typeof units.prompt_tokens !== 'number') return null;
  const cacheRead = n(units.cache_read_tokens);
  const w5 = n(units.cache_write_5m_tokens);
  const w1 = n(units.cache_write_1h_tokens);
  return {
    input_uncached:
      typeof units.input_uncached_tokens === 'number'
        ? units.input_uncached_tokens
        : Math.max(0, units.prompt_tokens - cacheRead - w5 - w1),
    cache_read: cacheRead,
    cache_write_5m: w5,
    cache_write_1h: w1,
    output: n(units.completion_tokens),
    reasoning: n(units.reasoning_tokens),
    ...(n(units.audio_input_tokens) ? { audio_input: n(units.audio_input_tokens) } : {}),
    ...(n(units.audio_output_tokens) ? { audio_output: n(units.audio_output_tokens) } : {}),
  };
}
