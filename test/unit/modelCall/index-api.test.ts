import { KINDS } from '../../../src/providers/kinds';
import {
  embeddingsUpstream,
  estimateEmbeddings,
  estimateNative,
  ModelRouter,
  openaiUpstream,
  openCall,
  settleEmbeddings,
  tokenUsage,
} from '../../../src/modelCall';
import { nativeBound } from '../../../src/billing/nativeBound';
import { Catalog, type CatalogFile, type ModelConfig } from '../../../src/catalog/catalog';
import { ProviderRegistry } from '../../../src/providers/registry';
import { holdBilling } from '../../../src/modelCall';
import { RecordingHold, testCaller } from '../../support/operationCaller';

/**
 * The model call's door (src/modelCall/index.ts) as the operations use it: an estimate over every candidate, the
 * call opened with it, each try handed its deployment's adapter, one settlement priced inside (or a cancel).
 */

const file: CatalogFile = {
  providers: {
    p1: { kind: 'openai', baseUrl: 'http://a' },
    p2: { kind: 'openai', baseUrl: 'http://b' },
    g: { kind: 'gemini', baseUrl: 'http://g' },
  },
  models: [
    // 1 VND an input token, 2 an output token
    {
      id: 'cheap',
      mode: 'chat',
      provider: 'p1',
      upstreamModel: 'c',
      pricing: { inputPer1MTokens: 1_000_000, outputPer1MTokens: 2_000_000 },
    },
    {
      id: 'spread',
      mode: 'chat',
      pricing: { inputPer1MTokens: 1_000_000, outputPer1MTokens: 2_000_000 },
      deployments: [
        { id: 'near', provider: 'p1', upstreamModel: 's' },
        { id: 'far', provider: 'p2', upstreamModel: 'a-much-longer-upstream-name' },
      ],
    },
    {
      id: 'falls',
      mode: 'chat',
      provider: 'p1',
      upstreamModel: 'f',
      pricing: { inputPer1MTokens: 1_000_000, outputPer1MTokens: 2_000_000 },
      fallbacks: ['dear'],
    },
    {
      id: 'dear',
      mode: 'chat',
      provider: 'p2',
      upstreamModel: 'd',
      pricing: { inputPer1MTokens: 5_000_000, outputPer1MTokens: 9_000_000 },
    },
    {
      id: 'embed',
      mode: 'embedding',
      provider: 'g',
      upstreamModel: 'e',
      pricing: { inputPer1MTokens: 1_000_000, outputPer1MTokens: 0 },
    },
  ] as unknown as ModelConfig[],
};
const catalog = new Catalog(file, KINDS);
const router = new ModelRouter(catalog, { maxAttempts: 2, maxTimeMs: 10_000, cooldownBaseMs: 1, cooldownMaxMs: 1 });
const providers = new ProviderRegistry(catalog);
const deps = { catalog, router, providers };
const m = (id: string) => catalog.get(id)!;
afterAll(() => providers.close());

test('an estimate covers every candidate: the longest upstream name, the dearest fallback', () => {
  const req = { bytes: 400, maxOutput: 100, media: 0 };
  expect(estimateNative(deps, m('cheap'), req)).toEqual(nativeBound(m('cheap'), 400, 100, 0));
  const longer = Buffer.byteLength('"a-much-longer-upstream-name"') - Buffer.byteLength('"s"');
  expect(estimateNative(deps, m('spread'), req)).toEqual(nativeBound(m('spread'), 400 + longer, 100, 0));
  expect(estimateNative(deps, m('falls'), req)).toEqual(nativeBound(m('dear'), 400, 100, 0));
  // Without a max output: the model's cap, else the default.
  expect(estimateNative(deps, m('cheap'), { bytes: 400, media: 0 }).maxTokens).toBeGreaterThan(100);
});

test("each try is handed its deployment's adapter; the call settles once at the answering model's prices", async () => {
  const hold = new RecordingHold();
  const caller = testCaller(holdBilling(hold));
  const estimate = estimateNative(deps, m('cheap'), { bytes: 10, maxOutput: 10, media: 0 });
  const call = await openCall(caller, deps, m('cheap'), 'chat.completions', estimate);
  const handed = await call.attempt(openaiUpstream, async (a, t) => ({ a, t }));
  expect(handed.a).toBe(providers.openaiFor(handed.t.deployment));
  // 1000 input tokens at 1 VND, 500 output at 2: priced inside settle.
  expect(call.settle(tokenUsage({ input: 1000, output: 500 }))).toBe(2000);
  expect(call.settle(tokenUsage({ input: 1, output: 1 }))).toBe(0);
  call.cancel(500);
  expect(hold.settled.map((s) => s.cost)).toEqual([2000]);
  expect(hold.cancelled).toEqual([]);
});

test('a call no upstream answers is cancelled: nothing charged, the last error thrown', async () => {
  const hold = new RecordingHold();
  const call = await openCall(testCaller(holdBilling(hold)), deps, m('cheap'), 'chat.completions', {
    maxCost: 10,
  });
  const boom = Object.assign(new Error('upstream down'), { status: 400 });
  await expect(call.attempt(openaiUpstream, async () => Promise.reject(boom))).rejects.toBe(boom);
  expect(hold.settled).toEqual([]);
  expect(hold.cancelled).toHaveLength(1);
});

test("embeddings: a Gemini deployment's embedder handed over; billed on its count, else estimated", async () => {
  const estimate = estimateEmbeddings(deps, m('embed'), 'x'.repeat(40));
  const hold = new RecordingHold();
  const call = await openCall(testCaller(holdBilling(hold)), deps, m('embed'), 'embeddings', estimate);
  const a = await call.attempt(embeddingsUpstream, async (up) => up);
  expect(a.gemini).not.toBeNull();
  // A Gemini answer carries no usage: the delivered-text rule over the input's bound, marked estimated.
  const tokens = settleEmbeddings(call, [[0.1, 0.2]], estimate.maxTokens);
  expect(hold.settled[0].usage).toMatchObject({ units: { prompt_tokens: tokens, estimated: 1 } });

  const counted = new RecordingHold();
  const c2 = await openCall(testCaller(holdBilling(counted)), deps, m('embed'), 'embeddings', estimate);
  await c2.attempt(embeddingsUpstream, async () => null);
  expect(settleEmbeddings(c2, Buffer.from('{"usage":{"prompt_tokens":7,"total_tokens":7}}'), 1)).toBe(7);
  expect(counted.settled[0].cost).toBe(7);
});
