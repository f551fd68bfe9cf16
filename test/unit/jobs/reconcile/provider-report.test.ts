import {
  dayOf,
  FIELDS,
  isReconciled,
  NOT_RECONCILED,
  providerCosts,
  providerReport,
  reportedFields,
  usdVndOf,
} from '../../../../src/jobs/reconcile/reconcile';
import type { ProviderConfig } from '../../../../src/catalog/catalog';
import { localServer, type LocalServer } from '../../../support/localServer';

/**
 * A provider's own report of a day, read from a local server answering as OpenAI's organization usage and costs
 * APIs: units summed per upstream model and field, the admin key sent, the day asked for exactly.
 */

let srv: LocalServer;
let asked: { path: string; auth: string | undefined }[] = [];
/** The report pages by path (without the query). */
let pages: Record<string, unknown> = {};
beforeAll(async () => {
  srv = await localServer();
  srv.handle((req, res) => {
    const url = new URL(req.url!, 'http://x');
    asked.push({ path: req.url!, auth: req.headers.authorization });
    const page = pages[url.pathname];
    res.writeHead(page === undefined ? 500 : 200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(page ?? { error: 'no such report' }));
  });
});
afterAll(() => srv.close());
beforeEach(() => {
  asked = [];
  pages = {};
});

const openai = (): ProviderConfig =>
  ({ id: 'oa', kind: 'openai', baseUrl: srv.url, apiKey: 'sk-plain', apiKeyEnv: 'OA_KEY' }) as ProviderConfig;
const DAY = '2026-03-04';
const START = Date.parse(`${DAY}T00:00:00Z`) / 1000;

test('the usage of a day: each report summed by model; cached input apart from the rest', async () => {
  pages = {
    '/organization/usage/completions': {
      data: [
        {
          results: [
            { model: 'gpt-x', input_tokens: 100, input_cached_tokens: 30, output_tokens: 7 },
            { model: 'gpt-x', input_tokens: 10, output_tokens: 3 },
            { model: 'gpt-y', input_tokens: 1 },
          ],
        },
      ],
    },
    '/organization/usage/embeddings': { data: [{ results: [{ model: 'emb', input_tokens: 50 }] }] },
    '/organization/usage/images': { data: [{ results: [{ model: 'img', images: 2 }] }] },
    '/organization/usage/audio_speeches': { data: [] },
    '/organization/usage/audio_transcriptions': { data: [{ results: [{ model: 'whisper', seconds: 61 }] }] },
  };
  const report = await providerReport(openai(), DAY, { OA_KEY_ADMIN: 'sk-admin' });
  const zero = Object.fromEntries(FIELDS.map((f) => [f, 0]));
  expect(Object.fromEntries(report)).toEqual({
    'gpt-x': { ...zero, input: 80, cache_read: 30, output: 10 },
    'gpt-y': { ...zero, input: 1 },
    emb: { ...zero, input: 50 },
    img: { ...zero, images: 2 },
    whisper: { ...zero, seconds: 61 },
  });
  expect(asked).toHaveLength(5);
  for (const a of asked) {
    expect(a.auth).toBe('Bearer sk-admin'); // the admin key, when one is set
    expect(a.path).toContain(`start_time=${START}&end_time=${START + 86_400}&bucket_width=1d`);
  }
});

test("without an admin key the provider's own key is sent; a report that fails fails the read", async () => {
  pages = { '/organization/usage/completions': { data: [] } };
  await expect(providerReport(openai(), DAY, {})).rejects.toThrow(
    'usage report /organization/usage/embeddings answered 500',
  );
  expect(asked[0].auth).toBe('Bearer sk-plain');
});

test('the costs of a day: USD by model and field, from "<model>, <kind>" line items; others skipped', async () => {
  pages = {
    '/organization/costs': {
      data: [
        {
          results: [
            { line_item: 'gpt-x, input', amount: { value: 0.5 } },
            { line_item: 'gpt-x, cached input', amount: { value: 0.25 } },
            { line_item: 'gpt-x, input', amount: { value: 1 } },
            { line_item: 'gpt-x, output', amount: { value: '2.5' } },
            { line_item: 'gpt-x, fine-tuning hours', amount: { value: 9 } }, // no such field
            { line_item: 'web search', amount: { value: 9 } }, // no model
            { line_item: 'gpt-x, output', amount: { value: 'n/a' } },
          ],
        },
      ],
    },
  };
  const costs = await providerCosts(openai(), DAY, {});
  expect(costs.get('gpt-x')).toMatchObject({ input: 1.5, cache_read: 0.25, output: 2.5 });
  expect([...costs.keys()]).toEqual(['gpt-x']);
});

test('which providers are reconciled, and the fields their reports carry', async () => {
  expect(isReconciled(openai())).toBe(true);
  expect(reportedFields(openai())).toEqual(['input', 'cache_read', 'output', 'images', 'characters', 'seconds']);
  const anthropic = { id: 'an', kind: 'anthropic', baseUrl: 'http://a' } as ProviderConfig;
  expect(isReconciled(anthropic)).toBe(true);
  const gemini = { id: 'g', kind: 'gemini', baseUrl: 'http://g' } as ProviderConfig;
  expect(isReconciled(gemini)).toBe(false);
  expect(reportedFields(gemini)).toEqual([]);
  expect(typeof NOT_RECONCILED.gemini).toBe('string'); // the report it would be read from
  expect(NOT_RECONCILED.openai).toBeUndefined();
  await expect(providerReport(gemini, DAY, {})).rejects.toThrow('provider g (gemini) has no usage report');
  expect((await providerCosts(gemini, DAY, {})).size).toBe(0);
});

test('the UTC day of an instant, and the USD rate (default 26,000 VND)', () => {
  expect(dayOf(new Date('2026-03-04T23:59:59.999Z'))).toBe('2026-03-04');
  expect(dayOf(new Date('2026-03-05T06:00:00+07:00'))).toBe('2026-03-04');
  expect(usdVndOf({})).toBe(26_000);
  expect(usdVndOf({ RECONCILE_USD_VND: '25500' })).toBe(25_500);
});
