import OpenAI from 'openai';
import { startGateway, type TestGateway } from '../support/gateway';
import { adminClient } from '../support/openaiAdminSchemas';
import { createAdminKey } from '../../src/organizations';

/**
 * Issue 48, point 5: usage and costs on OpenAI's Admin API from the gateway's own records (answers checked against
 * OpenAI's schemas); a day's costs are the ledger's charges of that day, to the dong.
 */
let gw: TestGateway;
let call: ReturnType<typeof adminClient>;
let other: ReturnType<typeof adminClient>;
let accountId: string;
let defaultKey: { key: string; keyId: string };
let project: string;
let saKey: { id: string; value: string };
const day = Math.floor(Date.now() / 86_400_000) * 86_400;

beforeAll(async () => {
  gw = await startGateway({}, { temporal: false });
  const a = await gw.account(10_000_000, 'usage');
  accountId = a.accountId;
  defaultKey = a;
  call = adminClient(gw.url, (await createAdminKey(gw.deps.db, accountId)).value);
  other = adminClient(gw.url, (await createAdminKey(gw.deps.db, (await gw.account(0)).accountId)).value);
  project = (await call('POST', '/v1/organization/projects', { name: 'spend' })).body.id;
  saKey = (await call('POST', `/v1/organization/projects/${project}/service_accounts`, { name: 'bot' })).body.api_key;

  const sdk = (key: string) => new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0 });
  const chat = (key: string, content: string) =>
    sdk(key).chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content }] });
  await chat(a.key, 'one');
  await chat(a.key, 'two two');
  await chat(saKey.value, 'three three three');
  await sdk(a.key).embeddings.create({ model: 'text-embedding-3-small', input: 'embed me' });
  await sdk(saKey.value).images.generate({ model: 'gpt-image-1', prompt: 'a cat' });
  await (await sdk(a.key).audio.speech.create({ model: 'tts-1', voice: 'alloy', input: 'hello there' })).arrayBuffer();
  await gw.deps.credit.flush();
});
afterAll(() => gw.close());

const usage = (kind: string, q: string) => call('GET', `/v1/organization/usage/${kind}?start_time=${day}&${q}`);
const records = async (ops: string[]) =>
  (
    await gw.deps.db.query(
      `SELECT u.units, u.model, u.api_key_id, k.project_id FROM usage_records u JOIN api_keys k ON k.id = u.api_key_id
       WHERE u.account_id = $1 AND u.operation = ANY($2) AND u.status < 400`,
      [accountId, ops],
    )
  ).rows;

test('completions usage: per day, per project, per key and model, from the usage records', async () => {
  const rows = await records(['chat.completions']);
  expect(rows).toHaveLength(3);
  const sum = (k: string, rs = rows) => rs.reduce((s, r) => s + Number(r.units[k] ?? 0), 0);
  const whole = await usage('completions', 'bucket_width=1d&limit=1');
  expect(whole.body.data).toHaveLength(1);
  expect(whole.body.data[0]).toMatchObject({ start_time: day, end_time: expect.any(Number) });
  expect(whole.body.data[0].results).toEqual([
    {
      object: 'organization.usage.completions.result',
      input_tokens: sum('prompt_tokens'),
      output_tokens: sum('completion_tokens'),
      input_cached_tokens: 0,
      num_model_requests: 3,
    },
  ]);
  const byProject = await usage('completions', 'group_by=project_id');
  const results = byProject.body.data.flatMap((b: any) => b.results);
  const mine = rows.filter((r) => r.project_id === project);
  expect(results.find((r: any) => r.project_id === project)).toMatchObject({
    num_model_requests: 1,
    input_tokens: sum('prompt_tokens', mine),
  });
  expect(results.find((r: any) => r.project_id !== project)).toMatchObject({ num_model_requests: 2 });
  const byKey = await usage('completions', 'group_by[]=api_key_id&group_by[]=model');
  expect(
    byKey.body.data.flatMap((b: any) => b.results.map((r: any) => [r.api_key_id, r.model, r.num_model_requests])),
  ).toEqual(
    expect.arrayContaining([
      [defaultKey.keyId, 'gpt-4o-mini', 2],
      [saKey.id, 'gpt-4o-mini', 1],
    ]),
  );
  expect((await usage('completions', `project_ids[]=${project}`)).body.data[0].results[0].num_model_requests).toBe(1);
});

test('embeddings, images and speech usage', async () => {
  const emb = (await usage('embeddings', '')).body.data.flatMap((b: any) => b.results);
  expect(emb).toEqual([expect.objectContaining({ num_model_requests: 1, input_tokens: expect.any(Number) })]);
  const img = (await usage('images', 'group_by=project_id')).body.data.flatMap((b: any) => b.results);
  expect(img).toEqual([expect.objectContaining({ images: 1, num_model_requests: 1, project_id: project })]);
  const tts = (await usage('audio_speeches', '')).body.data.flatMap((b: any) => b.results);
  expect(tts).toEqual([expect.objectContaining({ characters: 'hello there'.length, num_model_requests: 1 })]);
  expect((await usage('audio_transcriptions', '')).body.data.flatMap((b: any) => b.results)).toEqual([]);
});

test("a day's costs are exactly the ledger's charges that day, itemised by model and project", async () => {
  const charged = await gw.deps.db.query(
    `SELECT COALESCE(sum(amount), 0)::bigint AS vnd FROM ledger_events
     WHERE account_id = $1 AND kind = 'charged' AND created_at >= to_timestamp($2) AND created_at < to_timestamp($3)`,
    [accountId, day, day + 86_400],
  );
  const total = Number(charged.rows[0].vnd);
  expect(total).toBeGreaterThan(0);
  const end = `end_time=${day + 86_400}`;
  const costs = (await call('GET', `/v1/organization/costs?start_time=${day}&${end}`)).body;
  expect(costs.data).toHaveLength(1);
  expect(costs.data[0].results).toEqual([
    { object: 'organization.costs.result', amount: { value: total, currency: 'vnd' } },
  ]);
  const items = (
    await call('GET', `/v1/organization/costs?start_time=${day}&${end}&group_by=line_item&group_by=project_id`)
  ).body.data[0].results;
  expect(items.reduce((s: number, r: any) => s + r.amount.value, 0)).toBe(total);
  const costOf = async (models: string[]) =>
    Number(
      (
        await gw.deps.db.query(
          `SELECT COALESCE(sum(cost_vnd), 0)::bigint AS v FROM usage_records WHERE account_id = $1 AND model = ANY($2)`,
          [accountId, models],
        )
      ).rows[0].v,
    );
  const chatItems = items.filter((r: any) => r.line_item === 'gpt-4o-mini');
  expect(chatItems.reduce((s: number, r: any) => s + r.amount.value, 0)).toBe(await costOf(['gpt-4o-mini']));
  expect(new Set(chatItems.map((r: any) => r.project_id)).size).toBe(2);
  expect(items.map((r: any) => r.line_item)).toEqual(
    expect.arrayContaining(['gpt-4o-mini', 'text-embedding-3-small', 'gpt-image-1', 'tts-1']),
  );
  // The day before has none; another organization sees none of it.
  const before = (await call('GET', `/v1/organization/costs?start_time=${day - 86_400}&end_time=${day}`)).body;
  expect(before.data[0].results).toEqual([]);
  expect((await other('GET', `/v1/organization/costs?start_time=${day}`)).body.data[0].results).toEqual([]);
});

test('minute buckets page with next_page until the range ends', async () => {
  // The range ends a minute from now: requests of this very second are inside it (its end is exclusive).
  const start = Math.floor(Date.now() / 1000) - 89 * 60;
  const q = `start_time=${start}&end_time=${start + 90 * 60}&bucket_width=1m`;
  const first = (await call('GET', `/v1/organization/usage/completions?${q}`)).body;
  expect(first.data).toHaveLength(60);
  expect(first.has_more).toBe(true);
  const second = (await call('GET', `/v1/organization/usage/completions?${q}&page=${first.next_page}`)).body;
  expect(second.data).toHaveLength(30);
  expect(second.data[0].start_time).toBe(start + 60 * 60);
  expect(second).toMatchObject({ has_more: false, next_page: null });
  const all = [...first.data, ...second.data].flatMap((b: any) => b.results);
  expect(all.reduce((s: number, r: any) => s + r.num_model_requests, 0)).toBe(3);
});

test('bad queries are 400s naming the parameter', async () => {
  for (const [path, param] of [
    ['/v1/organization/usage/completions', 'start_time'],
    [`/v1/organization/usage/completions?start_time=${day}&bucket_width=2h`, 'bucket_width'],
    [`/v1/organization/usage/completions?start_time=${day}&group_by=user_id`, 'group_by'],
    [`/v1/organization/usage/completions?start_time=${day}&page=bm9wZQ`, 'page'],
    [`/v1/organization/usage/completions?start_time=${day}&bucket_width=1d&limit=32`, 'limit'],
    [`/v1/organization/usage/completions?start_time=${day}&end_time=${day}`, 'end_time'],
    [`/v1/organization/costs?start_time=-5`, 'start_time'],
    [`/v1/organization/costs?start_time=${day}&project_ids=${encodeURIComponent("'; --")}`, 'project_ids'],
  ]) {
    const r = await call('GET', path);
    expect([path, r.status, r.body.error.param]).toEqual([path, 400, param]);
  }
});
