import {
  fromAnthropicUsage,
  fromChatUsage,
  fromResponsesUsage,
  usageCost,
  usageUnits,
} from '../../../src/billing/tokenUsage';
import { audioCost, charactersCost, imagesCost, tokensBoundCost, tokensCost } from '../../../src/billing/pricing';
import { unitsCost } from '../../../src/billing/usageVerify';

/** Each provider's usage fields, read into one breakdown and priced field by field, rounded up once. */

const sonnet = {
  inputPer1MTokens: 78000,
  cachedInputPer1MTokens: 7800,
  cacheWrite5mPer1MTokens: 97500,
  cacheWrite1hPer1MTokens: 156000,
  outputPer1MTokens: 390000,
};

test('Anthropic: input_tokens exclude reads and writes; writes split by TTL (no split: 5 minutes)', () => {
  expect(
    fromAnthropicUsage({
      input_tokens: 10,
      cache_read_input_tokens: 100,
      cache_creation_input_tokens: 30,
      cache_creation: { ephemeral_5m_input_tokens: 10, ephemeral_1h_input_tokens: 20 },
      output_tokens: 5,
    }),
  ).toEqual({
    input: 10,
    cacheRead: 100,
    cacheWrite5m: 10,
    cacheWrite1h: 20,
    output: 5,
    reasoning: 0,
    estimated: false,
  });
  expect(fromAnthropicUsage({ input_tokens: 1, cache_creation_input_tokens: 7, output_tokens: 2 })).toMatchObject({
    cacheWrite5m: 7,
    cacheWrite1h: 0,
  });
});

test('OpenAI chat and Responses: cached tokens are inside the prompt, reasoning inside the output', () => {
  expect(
    fromChatUsage({
      prompt_tokens: 1000,
      completion_tokens: 50,
      prompt_tokens_details: { cached_tokens: 800 },
      completion_tokens_details: { reasoning_tokens: 30 },
    }),
  ).toEqual({
    input: 200,
    cacheRead: 800,
    cacheWrite5m: 0,
    cacheWrite1h: 0,
    output: 50,
    reasoning: 30,
    estimated: false,
  });
  expect(
    fromResponsesUsage({
      input_tokens: 1000,
      output_tokens: 50,
      input_tokens_details: { cached_tokens: 800 },
      output_tokens_details: { reasoning_tokens: 30 },
    }),
  ).toEqual(
    fromChatUsage({
      prompt_tokens: 1000,
      completion_tokens: 50,
      prompt_tokens_details: { cached_tokens: 800 },
      completion_tokens_details: { reasoning_tokens: 30 },
    }),
  );
  // Inconsistent details never make a field negative.
  expect(
    fromChatUsage({
      prompt_tokens: 10,
      completion_tokens: 1,
      prompt_tokens_details: { cached_tokens: 50, cache_write_tokens: 9 },
    }),
  ).toMatchObject({ input: 0, cacheRead: 10, cacheWrite5m: 0 });
});

test('the cost sums each field at its price and rounds up once, not per field', () => {
  // 1 token of each: 78000 + 7800 + 97500 + 156000 + 390000 = 729300 -> 0.7293 VND -> 1 (per field it would be 5).
  expect(
    usageCost(sonnet, {
      input: 1,
      cacheRead: 1,
      cacheWrite5m: 1,
      cacheWrite1h: 1,
      output: 1,
      reasoning: 0,
      estimated: false,
    }),
  ).toBe(1);
  expect(
    usageCost(sonnet, {
      input: 1000,
      cacheRead: 100_000,
      cacheWrite5m: 2000,
      cacheWrite1h: 3000,
      output: 500,
      reasoning: 0,
      estimated: false,
    }),
  ).toBe(Math.ceil((1000 * 78000 + 100_000 * 7800 + 2000 * 97500 + 3000 * 156000 + 500 * 390000) / 1e6));
  // Cache prices the catalog does not give are the input price.
  expect(
    usageCost(
      { inputPer1MTokens: 1_000_000, outputPer1MTokens: 0 },
      { input: 1, cacheRead: 2, cacheWrite5m: 3, cacheWrite1h: 4, output: 9, reasoning: 0, estimated: false },
    ),
  ).toBe(10);
});

test('the funds bound prices every prompt token at the highest input price', () => {
  expect(tokensBoundCost(sonnet, 1000, 10)).toBe(Math.ceil((1000 * 156000 + 10 * 390000) / 1e6));
});

test('usage record units: prompt and completion totals, the cache fields present only when used', () => {
  expect(usageUnits(fromChatUsage({ prompt_tokens: 7, completion_tokens: 3 }))).toEqual({
    prompt_tokens: 7,
    completion_tokens: 3,
  });
  expect(
    usageUnits(
      fromAnthropicUsage({
        input_tokens: 10,
        cache_read_input_tokens: 100,
        cache_creation_input_tokens: 30,
        cache_creation: { ephemeral_5m_input_tokens: 10, ephemeral_1h_input_tokens: 20 },
        output_tokens: 5,
      }),
    ),
  ).toEqual({
    prompt_tokens: 140,
    completion_tokens: 5,
    input_uncached_tokens: 10,
    cache_read_tokens: 100,
    cache_write_5m_tokens: 10,
    cache_write_1h_tokens: 20,
  });
});

test('verify-ledger re-prices a record from its units alone to what the meter charged, for every billed shape', () => {
  const p = { ...sonnet, perImage: 1_300, per1KChars: 390, perAudioMinute: 156 };
  let seed = 7;
  const rnd = (n: number) => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % n;
  for (let i = 0; i < 500; i++) {
    const t = fromAnthropicUsage({
      input_tokens: rnd(100_000),
      cache_read_input_tokens: rnd(3) ? rnd(50_000) : 0,
      cache_creation_input_tokens: rnd(2) ? rnd(20_000) : 0,
      cache_creation: { ephemeral_5m_input_tokens: rnd(5_000), ephemeral_1h_input_tokens: rnd(5_000) },
      output_tokens: rnd(30_000),
    });
    expect(unitsCost(p, usageUnits(t))).toBe(usageCost(p, t));
  }
  expect(unitsCost(p, { images: 3 })).toBe(imagesCost(p, 3));
  expect(unitsCost(p, { characters: 1234 })).toBe(charactersCost(p, 1234));
  const ms = 61_234;
  expect(unitsCost(p, { audio_seconds: ms / 1000 })).toBe(audioCost(p, ms));
  expect(unitsCost(p, { prompt_tokens: 1234, estimated: 1 })).toBe(tokensCost(p, 1234));
  expect(unitsCost(p, { something: 1 })).toBeNull();
});

test('reasoning and audio at their own prices, the 200k tier, bounds at the highest price; verify re-prices', () => {
  const p = {
    inputPer1MTokens: 100,
    outputPer1MTokens: 1000,
    reasoningPer1MTokens: 2000,
    audioInputPer1MTokens: 400,
    audioOutputPer1MTokens: 8000,
    above200kTokens: { inputPer1MTokens: 200, outputPer1MTokens: 1500 },
  };
  const t = fromChatUsage({
    prompt_tokens: 1_000_000,
    completion_tokens: 1_000_000,
    prompt_tokens_details: { audio_tokens: 250_000 },
    completion_tokens_details: { reasoning_tokens: 500_000, audio_tokens: 100_000 },
  });
  expect(t).toMatchObject({ input: 1_000_000, audioInput: 250_000, output: 1_000_000, audioOutput: 100_000 });
  // Above 200k prompt tokens: input and text output at the tier's prices, the rest at the base's own.
  expect(usageCost(p, t)).toBe(
    Math.ceil((750_000 * 200 + 250_000 * 400 + 400_000 * 1500 + 500_000 * 2000 + 100_000 * 8000) / 1e6),
  );
  expect(usageCost(p, fromChatUsage({ prompt_tokens: 1000, completion_tokens: 0 }))).toBe(1);
  expect(unitsCost(p, usageUnits(t))).toBe(usageCost(p, t));
  expect(tokensBoundCost(p, 1_000_000, 1_000_000)).toBe(400 + 8000);
});
