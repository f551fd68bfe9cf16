import {
  audioCost,
  ceilDiv,
  charactersCost,
  countCharacters,
  embeddingTokensBound,
  estimateChatMaxCost,
  imagesCost,
  outputTokensBound,
  tokensCost,
} from '../../../src/billing/pricing';
import type { ModelConfig } from '../../../src/catalog/catalog';

const chat: ModelConfig = {
  id: 'm',
  mode: 'chat',
  provider: 'p',
  upstreamModel: 'm',
  pricing: { inputPer1MTokens: 65_000, outputPer1MTokens: 260_000 },
  maxOutputTokens: 16_384,
  contextWindow: 128_000,
};

test('ceilDiv rounds up exactly, also beyond 2^53', () => {
  expect(ceilDiv(0, 1_000_000)).toBe(0);
  expect(ceilDiv(1, 1_000_000)).toBe(1);
  expect(ceilDiv(1_000_000, 1_000_000)).toBe(1);
  expect(ceilDiv(1_000_001, 1_000_000)).toBe(2);
  expect(ceilDiv(2 ** 60, 1_000_000)).toBe(Number((2n ** 60n + 999_999n) / 1_000_000n));
});

test('token, character, audio and image costs are integer VND rounded up', () => {
  expect(tokensCost(chat.pricing, 6, 8)).toBe(3); // 2.47 -> 3
  expect(tokensCost(chat.pricing, 0, 0)).toBe(0);
  expect(tokensCost({ inputPer1MTokens: 520 }, 1_000_000)).toBe(520);
  expect(tokensCost({ inputPer1MTokens: 520 }, 1_000_001)).toBe(521);
  expect(charactersCost({ per1KChars: 390 }, 11)).toBe(5); // 4.29 -> 5
  expect(charactersCost({ per1KChars: 390 }, 1000)).toBe(390);
  expect(audioCost({ perAudioMinute: 156 }, 60_000)).toBe(156);
  expect(audioCost({ perAudioMinute: 156 }, 1000)).toBe(3); // 2.6 -> 3
  expect(imagesCost({ perImage: 1040 }, 3)).toBe(3120);
  expect(imagesCost({}, 3)).toBe(0);
});

test('the chat funds bound covers prompt bytes, non-text parts and max output tokens times choices', () => {
  const body = { model: 'm', messages: [{ role: 'user', content: 'héllo' }], max_tokens: 100, n: 2 };
  const bytes = Buffer.byteLength(JSON.stringify(body));
  const b = estimateChatMaxCost(chat, body);
  expect(b.promptTokens).toBe(bytes);
  expect(b.outputTokens).toBe(200);
  expect(b.maxCost).toBe(Math.ceil((bytes * 65_000 + 200 * 260_000) / 1e6));
  const withImage = estimateChatMaxCost(
    chat,
    { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://x/y.png' } }] }] },
    100,
  );
  expect(withImage.promptTokens).toBe(2100);
  expect(withImage.outputTokens).toBe(16_384); // the model's cap when max_tokens is absent
  expect(estimateChatMaxCost(chat, { messages: [] }, 10_000_000).promptTokens).toBe(128_000); // context window cap
  expect(outputTokensBound(chat, { max_completion_tokens: 50, max_tokens: 10 })).toBe(50);
  expect(outputTokensBound(chat, { prompt: ['a', 'b'], max_tokens: 10, best_of: 3, n: 2 })).toBe(60);
});

test('embedding bound and speech characters', () => {
  expect(embeddingTokensBound('héllo')).toBe(6);
  expect(embeddingTokensBound(['ab', 'c'])).toBe(3);
  expect(embeddingTokensBound([1, 2, 3])).toBe(3);
  expect(embeddingTokensBound([[1, 2], [3]])).toBe(3);
  expect(countCharacters('Xin chào')).toBe(8);
  expect(countCharacters('a😀b')).toBe(3);
});

test('a token count beyond any route (1e308, 2^53+1) bounds as 10M tokens: finite, an exact VND amount', () => {
  for (const max of [1e308, 2 ** 53 + 1, Number.MAX_VALUE]) {
    const b = estimateChatMaxCost(chat, { max_tokens: max, n: 1e308, messages: [] }, 100);
    expect(b.outputTokens).toBe(10_000_000 * 10_000_000);
    expect(Number.isSafeInteger(b.maxCost)).toBe(true);
  }
  expect(() => ceilDiv(Infinity, 1_000_000)).toThrow(RangeError);
});
