import { Readable } from 'node:stream';
import { Catalog, type CatalogFile, type ModelConfig } from '../../../src/catalog/catalog';
import { ModelRouter } from '../../../src/modelCall/modelRouter';
import { batchBound, itemBound } from '../../../src/batches/bound';
import { KINDS } from '../../../src/providers/kinds';

/**
 * The most a batch can cost, line by line: every prompt byte a token and the output cap, at the answering model's
 * batch prices, over every deployment and fallback that may answer. Prices here are VND per 1M tokens, chosen so
 * the arithmetic is easy to follow: batch input 0.5 VND a token, batch output 1 VND a token.
 */

const file = (): CatalogFile => ({
  providers: { p: { kind: 'openai', baseUrl: 'http://a' }, q: { kind: 'openai', baseUrl: 'http://b' } },
  models: [
    {
      id: 'm',
      mode: 'chat',
      provider: 'p',
      upstreamModel: 'm',
      pricing: { inputPer1MTokens: 1_000_000, outputPer1MTokens: 2_000_000 },
      batchPricing: { inputPer1MTokens: 500_000, outputPer1MTokens: 1_000_000 },
      maxOutputTokens: 1000,
    },
    // No batch prices: a batch pays its list prices.
    {
      id: 'list',
      mode: 'chat',
      provider: 'p',
      upstreamModel: 'list',
      pricing: { inputPer1MTokens: 1_000_000, outputPer1MTokens: 0 },
    },
    {
      id: 'emb',
      mode: 'embedding',
      provider: 'p',
      upstreamModel: 'emb',
      pricing: { inputPer1MTokens: 300_000 },
      batchPricing: { inputPer1MTokens: 100_000, cachedInputPer1MTokens: 200_000 },
    },
    // Falls back to a dearer model whose deployment has a longer upstream name.
    {
      id: 'cheap',
      mode: 'chat',
      provider: 'p',
      upstreamModel: 'cheap',
      pricing: { inputPer1MTokens: 1, outputPer1MTokens: 1 },
      fallbacks: ['dear'],
    },
    {
      id: 'dear',
      mode: 'chat',
      pricing: { inputPer1MTokens: 1_000_000, outputPer1MTokens: 1_000_000 },
      deployments: [{ provider: 'q', upstreamModel: 'dear-with-a-longer-name' }],
    },
  ] as ModelConfig[],
});

const catalog = new Catalog(file(), KINDS);
const router = new ModelRouter(catalog, {
  maxAttempts: 3,
  maxTimeMs: 10_000,
  cooldownBaseMs: 1000,
  cooldownMaxMs: 8000,
});
const model = (id: string) => catalog.get(id)!;

test('a chat line: its bytes as prompt tokens plus its output cap, at batch prices', () => {
  const body = { model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 10 };
  expect(itemBound(catalog, router, model('m'), '/v1/chat/completions', body, 101)).toBe(51 + 10); // ceil(50.5)
  // No cap given: the model's maximum output.
  const { max_tokens: _m, ...uncapped } = body;
  expect(itemBound(catalog, router, model('m'), '/v1/chat/completions', uncapped, 100)).toBe(50 + 1000);
  // n choices each get the cap.
  expect(itemBound(catalog, router, model('m'), '/v1/chat/completions', { ...body, n: 3 }, 100)).toBe(50 + 30);
  // A model without batch prices is bounded at its list prices (its output is free here; the default cap is 4096).
  expect(itemBound(catalog, router, model('list'), '/v1/chat/completions', { model: 'list', messages: [] }, 7)).toBe(7);
});

test('responses and messages lines name their output cap their own way; one answer each, whatever n says', () => {
  const responses = { model: 'm', input: 'hi', max_output_tokens: 20, n: 5 };
  expect(itemBound(catalog, router, model('m'), '/v1/responses', responses, 40)).toBe(20 + 20);
  const messages = { model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 30, n: 5 };
  expect(itemBound(catalog, router, model('m'), '/v1/messages', messages, 40)).toBe(20 + 30);
});

test('an embeddings line: the UTF-8 bytes of its inputs (or token counts) at the highest input price', () => {
  const e = (input: unknown) => itemBound(catalog, router, model('emb'), '/v1/embeddings', { model: 'emb', input }, 0);
  // 0.2 VND a token: the cached price is the higher one, and the bound must cover it.
  expect(e('x'.repeat(10))).toBe(2);
  expect(e(['chào', 'ab'])).toBe(2); // 5 + 2 bytes: ceil(1.4)
  expect(e([[1, 2, 3], 4])).toBe(1); // 3 + 1 tokens: ceil(0.8)
  expect(e(42)).toBe(0);
});

test('a model with a fallback is bounded by its dearest candidate, with room for a longer upstream name', () => {
  const body = { model: 'cheap', messages: [], max_tokens: 10 };
  // dear: list prices (no batch prices), 1 VND a token each side; its upstream name is 18 bytes longer than "cheap".
  expect(itemBound(catalog, router, model('cheap'), '/v1/chat/completions', body, 100)).toBe(100 + 18 + 10);
});

test('a whole file: the sum over its lines; blank lines are not requests, a failing line costs nothing', async () => {
  const good = (id: string, max: number) =>
    JSON.stringify({
      custom_id: id,
      method: 'POST',
      url: '/v1/chat/completions',
      body: { model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: max },
    });
  const a = good('a', 10);
  const b = good('b', 20);
  const tooBig = good('c', 5000); // over the model's cap of 1000: this line fails alone when it runs
  const input = [a, '', '   ', b, tooBig, 'not json'].join('\n') + '\n';
  const bound = await batchBound(
    catalog,
    router,
    model('m'),
    '/v1/chat/completions',
    Readable.from([Buffer.from(input)]),
  );
  const bytes = (s: string) => Buffer.byteLength(s);
  expect(bound).toEqual({
    requests: 4,
    maxCost: Math.ceil(bytes(a) / 2) + 10 + Math.ceil(bytes(b) / 2) + 20,
  });
  expect(
    await batchBound(catalog, router, model('m'), '/v1/chat/completions', Readable.from([Buffer.from('\n\n')])),
  ).toEqual({
    requests: 0,
    maxCost: 0,
  });
});
