import type { ModelConfig, Pricing } from '../catalog';
import { mediaParts, mediaTokens } from './imageTokens';

/**
 * Costs in integer VND from catalog prices. Every cost is rounded UP to a whole VND, on exact integer
 * arithmetic (BigInt when a product would leave the safe-integer range), never on floats.
 *
 * Funds bounds (what is reserved before an upstream call) are upper bounds of the actual cost:
 * - chat/completions prompt tokens <= UTF-8 bytes of the serialised request (a token is at least one byte, and the
 *   JSON keys and quotes cover per-message overhead, system prompts, tool definitions and tool calls), plus each
 *   image at its provider's rule by detail and size, and a fixed allowance per audio or file part (a URL is a few
 *   bytes but costs many tokens: ./imageTokens.ts), capped by the model's context window;
 * - output tokens <= max_completion_tokens / max_tokens, else the model's maxOutputTokens, times the choices (n).
 */

/**
 * The largest token count a request may name (max_tokens, max_completion_tokens, max_output_tokens,
 * budget_tokens). Above every model's context window, so no real request meets it; bounded so the cost bound
 * computed from it stays an exact VND amount (1e7 tokens at 1.000.000 ₫ per 1M is 1e7 ₫). Each model's own
 * output cap is checked by the router (src/catalog/outputCap.ts) or applied by the translation.
 */
export const MAX_TOKEN_COUNT = 10_000_000;

export const DEFAULT_MAX_OUTPUT_TOKENS = 4096;
/** The delivered-text rule for cut streams and missing usage: one token per 4 characters, rounded up. */
export const CHARS_PER_TOKEN = 4;

export function tokensFromChars(chars: number): number {
  return Math.ceil(chars / CHARS_PER_TOKEN);
}

/** ceil(a / b) for non-negative integers a and positive integer b, exact at any size. */
export function ceilDiv(a: number, b: number): number {
  if (!Number.isFinite(a)) throw new RangeError(`ceilDiv of a non-finite count (${a})`);
  const x = Math.ceil(a);
  if (x <= 0) return 0;
  if (Number.isSafeInteger(x + b)) return Math.floor((x + b - 1) / b);
  const big = (BigInt(x) + BigInt(b) - 1n) / BigInt(b);
  return Number(big);
}

function mulAdd(terms: [number, number][]): number {
  for (const [a] of terms) if (!Number.isFinite(a)) throw new RangeError(`cost of a non-finite count (${a})`);
  let safe = true;
  let sum = 0;
  for (const [a, b] of terms) {
    sum += Math.ceil(a) * b;
    if (!Number.isSafeInteger(sum)) safe = false;
  }
  if (safe) return sum;
  // Only reachable with absurd inputs; keep it exact anyway.
  const big = terms.reduce((s, [a, b]) => s + BigInt(Math.ceil(a)) * BigInt(b), 0n);
  return Number(big);
}

/** Sum of count x price-per-1M-tokens over `terms`, rounded up to a whole VND once. */
export function perMillionCost(terms: [number, number][]): number {
  return ceilDiv(mulAdd(terms), 1_000_000);
}

/** Input tokens at the input price plus output tokens at the output price, per 1M tokens, rounded up. */
export function tokensCost(p: Pricing, inputTokens: number, outputTokens = 0): number {
  return perMillionCost([
    [inputTokens, p.inputPer1MTokens ?? 0],
    [outputTokens, p.outputPer1MTokens ?? 0],
  ]);
}

/** The base prices and, where the model has one, its long-context tier (a bound must cover either). */
const tiers = (p: Pricing): Pricing[] => (p.above200kTokens ? [p, { ...p, ...p.above200kTokens }] : [p]);

/**
 * The highest price an input token can have: a funds bound must cover every prompt token being a cache write (or
 * audio), at the long-context tier when the model has one.
 */
export function maxInputPrice(p: Pricing): number {
  return Math.max(
    ...tiers(p).map((t) =>
      Math.max(
        t.inputPer1MTokens ?? 0,
        t.cachedInputPer1MTokens ?? 0,
        t.cacheWrite5mPer1MTokens ?? 0,
        t.cacheWrite1hPer1MTokens ?? 0,
        t.audioInputPer1MTokens ?? 0,
      ),
    ),
  );
}

/** The highest price an output token can have (reasoning and audio output included, either tier). */
export function maxOutputPrice(p: Pricing): number {
  return Math.max(
    ...tiers(p).map((t) =>
      Math.max(t.outputPer1MTokens ?? 0, t.reasoningPer1MTokens ?? 0, t.audioOutputPer1MTokens ?? 0),
    ),
  );
}

/** Upper bound of a token-billed request's cost: every prompt and output token at the highest price of its side. */
export function tokensBoundCost(p: Pricing, promptTokens: number, outputTokens: number): number {
  return perMillionCost([
    [promptTokens, maxInputPrice(p)],
    [outputTokens, maxOutputPrice(p)],
  ]);
}

/** Speech: characters of input at the per-1K-characters price, rounded up. */
export function charactersCost(p: Pricing, chars: number): number {
  return ceilDiv(mulAdd([[chars, p.per1KChars ?? 0]]), 1000);
}

/** Transcription: audio milliseconds at the per-minute price, rounded up. */
export function audioCost(p: Pricing, audioMs: number): number {
  return ceilDiv(mulAdd([[audioMs, p.perAudioMinute ?? 0]]), 60_000);
}

export function imagesCost(p: Pricing, images: number): number {
  return mulAdd([[images, p.perImage ?? 0]]);
}

interface ChatBodyLike {
  max_tokens?: unknown;
  max_completion_tokens?: unknown;
  n?: unknown;
  best_of?: unknown;
  prompt?: unknown;
  messages?: unknown;
}

/**
 * A positive integer count, at most MAX_TOKEN_COUNT: the routes refuse more before anything runs, and the cap keeps
 * every product below finite (1e308 times 2 is Infinity, which no integer arithmetic takes).
 */
const posInt = (v: unknown): number | undefined =>
  typeof v === 'number' && Number.isInteger(v) && v > 0 ? Math.min(v, MAX_TOKEN_COUNT) : undefined;

/** Output-token cap of a chat or legacy completion request: its max tokens (or the model's) times its choices. */
export function outputTokensBound(model: ModelConfig, body: ChatBodyLike): number {
  const perChoice =
    posInt(body.max_completion_tokens) ?? posInt(body.max_tokens) ?? model.maxOutputTokens ?? DEFAULT_MAX_OUTPUT_TOKENS;
  // Legacy completions generate best_of candidates per prompt and bill them all.
  const choices = Math.max(posInt(body.n) ?? 1, posInt(body.best_of) ?? 1);
  const prompts =
    Array.isArray(body.prompt) && body.prompt.length > 0 && typeof body.prompt[0] !== 'number' ? body.prompt.length : 1;
  return perChoice * choices * prompts;
}

/** Upper bound of prompt tokens for a serialised chat/completions request of `payloadBytes` UTF-8 bytes. */
export function promptTokensBound(model: ModelConfig, payloadBytes: number, extraTokens = 0): number {
  const bound = payloadBytes + extraTokens;
  return model.contextWindow ? Math.min(bound, model.contextWindow) : bound;
}

export interface ChatCostBound {
  promptTokens: number;
  outputTokens: number;
  maxCost: number;
}

/**
 * The most a chat (or legacy completion) request can cost: reserve this before calling the upstream.
 * `payloadBytes` is the UTF-8 size of the JSON sent upstream (pass it when already serialised).
 */
export function estimateChatMaxCost(model: ModelConfig, body: ChatBodyLike, payloadBytes?: number): ChatCostBound {
  const bytes = payloadBytes ?? Buffer.byteLength(JSON.stringify(body));
  const promptTokens = promptTokensBound(model, bytes, mediaTokens(model, mediaParts(body.messages)));
  const outputTokens = outputTokensBound(model, body);
  return { promptTokens, outputTokens, maxCost: tokensBoundCost(model.pricing, promptTokens, outputTokens) };
}

/** Embeddings: inputs' UTF-8 bytes (or token counts for token-array inputs) bound the input tokens. */
export function embeddingTokensBound(input: unknown): number {
  if (typeof input === 'string') return Buffer.byteLength(input);
  if (!Array.isArray(input)) return 0;
  let n = 0;
  for (const x of input) {
    if (typeof x === 'string') n += Buffer.byteLength(x);
    else if (typeof x === 'number') n += 1;
    else if (Array.isArray(x)) n += x.length;
  }
  return n;
}

/** Speech is billed per character: Unicode code points of the input. */
export function countCharacters(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0xd800 || c > 0xdbff) n++; // count a surrogate pair once
  }
  return n;
}
