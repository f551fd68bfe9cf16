import { randomUUID } from 'node:crypto';
import { eventually, startVideoHarness, type VideoHarness } from '../support/video';
import { redactorFor } from '../../src/catalog/redact';
import { ConsoleClient, jsonOf, makeLogin } from '../e2e/consoleClient';
import { WORKFLOW_TEST_MS } from '../support/budgets';

/**
 * Error messages never name catalog internals to clients (provider ids, upstream base URLs, key variables,
 * upstream model names); the logs keep the detail.
 */

let h: VideoHarness;
let internals: RegExp;
beforeAll(async () => {
  h = await startVideoHarness();
  const c = h.deps.catalog;
  const names = [...c.providers.values()]
    .flatMap((p) => [p.id, p.baseUrl, p.apiKeyEnv ?? p.id])
    .concat(c.models.filter((m) => m.upstreamModel !== m.id).map((m) => m.upstreamModel));
  internals = new RegExp(names.map((n) => n.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|'));
});
afterAll(async () => {
  await h?.close();
});

test('the default catalog has internals worth hiding (this test can fail)', () => {
  expect('Seedance (emulator-seedance) at http://x').toMatch(internals);
  expect('dreamina-seedance-2-0-260128').toMatch(internals);
});

test('the redactor replaces provider ids, URLs, key variables and upstream model names, and nothing else', () => {
  const redact = redactorFor(h.deps.catalog);
  const seedance = h.deps.catalog.providers.get('emulator-seedance')!;
  const text =
    `Seedance (emulator-seedance) answered 400 at ${seedance.baseUrl}/contents/generations/tasks: ` +
    'model dreamina-seedance-2-0-260128 is not enabled; check EMULATOR_API_KEY';
  const out = redact(text);
  expect(out).not.toMatch(internals);
  expect(out).toBe(
    'Seedance (upstream) answered 400 at the upstream/contents/generations/tasks: ' +
      'model seedance-2-0 is not enabled; check upstream key',
  );
  const plain = 'an openai-compatible upstream named emulator-seedance-2 or xemulator-veo; gpt-4o-mini is fine';
  expect(redact(plain)).toBe(plain);
});

test(
  'a provider rejection fails the job with a message that names no provider id',
  async () => {
    const acc = await h.account(1_000_000);
    const r = await fetch(`${h.url}/v1/videos`, {
      method: 'POST',
      headers: { authorization: `Bearer ${acc.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'seedance-2-0', prompt: 'a scene [reject]', seconds: 4 }),
    });
    expect(r.status).toBe(202);
    const { id } = (await r.json()) as { id: string };
    const done = await eventually(async () => {
      const j = (await (
        await fetch(`${h.url}/v1/videos/${id}`, { headers: { authorization: `Bearer ${acc.key}` } })
      ).json()) as { status: string; error?: { message: string } };
      return j.status === 'failed' ? j : null;
    });
    expect(done.error!.message).toMatch(/rejected/);
    expect(JSON.stringify(done)).not.toMatch(internals);
    // Stored that way too, so the console's job pages show the same text.
    const row = await h.deps.db.query('SELECT error_message FROM video_jobs WHERE id = $1', [id]);
    expect(row.rows[0].error_message).not.toMatch(internals);
  },
  WORKFLOW_TEST_MS,
);

test('a job that failed before redaction existed is shown redacted', async () => {
  const acc = await h.account(0);
  const id = randomUUID();
  await h.deps.db.query(
    `INSERT INTO video_jobs (id, account_id, model, provider, status, request, request_hash, seconds, price_per_second,
       max_cost_vnd, hold_id, workflow_id, error_message, error_code)
     VALUES ($1, $2, 'seedance-2-0', 'emulator-seedance', 'failed', '{"prompt":"x"}', 'h', 4, 1000, 4000, $3, $4,
       'Seedance (emulator-seedance) answered 400: no', 'ProviderRejected')`,
    [id, acc.accountId, randomUUID(), `video-${id}`],
  );
  const j = (await (
    await fetch(`${h.url}/v1/videos/${id}`, { headers: { authorization: `Bearer ${acc.key}` } })
  ).json()) as { error: { message: string } };
  expect(j.error.message).toBe('Seedance (upstream) answered 400: no');
  // The console's job pages (customer and operator) show it redacted too.
  const customer = new ConsoleClient(h.url);
  const cl = await makeLogin(h, acc.accountId);
  expect((await customer.signIn(cl.email, cl.password)).status).toBe(200);
  expect((await customer.json('GET', `/console/api/jobs/${id}`)).error.message).toBe(
    'Seedance (upstream) answered 400: no',
  );
  expect((await customer.json('GET', '/console/api/jobs')).data[0].error.message).toBe(
    'Seedance (upstream) answered 400: no',
  );
  const operator = new ConsoleClient(h.url);
  const ol = await makeLogin(h, (await h.account(0)).accountId, 'operator');
  expect((await operator.signIn(ol.email, ol.password)).status).toBe(200);
  const listed = await jsonOf(await operator.request('GET', `/console/api/admin/accounts/${acc.accountId}/jobs`));
  expect(listed.data[0].error.message).toBe('Seedance (upstream) answered 400: no');
});

test("the model lists name each model's vendor as owned_by, never a provider id", async () => {
  const acc = await h.account(0);
  for (const [path, headers] of [
    ['/v1/models', { authorization: `Bearer ${acc.key}` }],
    ['/public/models', {}],
  ] as const) {
    const list = (await (await fetch(h.url + path, { headers })).json()) as {
      data: { id: string; owned_by: string }[];
    };
    const owners = Object.fromEntries(list.data.map((m) => [m.id, m.owned_by]));
    expect(owners).toMatchObject({
      'gpt-4o-mini': 'openai',
      'claude-sonnet-4-6': 'anthropic',
      'veo-3.1-generate-preview': 'google',
      'seedance-2-0': 'bytedance',
    });
    expect(JSON.stringify(list)).not.toMatch(internals);
  }
});
