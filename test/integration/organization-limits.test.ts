import { startGateway, type TestGateway } from '../support/gateway';
import { adminClient } from '../support/openaiAdminSchemas';
import { createAdminKey } from '../../src/organizations';

/**
 * Issue 48, point 3: spend limits of an organization and of a project (VND a month), enforced on model requests by
 * the ledger as key budgets are (src/billing/budget.ts); answers checked against OpenAI's schemas.
 */
let gw: TestGateway;
let call: ReturnType<typeof adminClient>;
let acc: Awaited<ReturnType<TestGateway['account']>>;
let project: string;
let saKey: string;

beforeAll(async () => {
  gw = await startGateway({}, { temporal: false });
  acc = await gw.account(10_000_000, 'limits');
  call = adminClient(gw.url, (await createAdminKey(gw.deps.db, acc.accountId)).value);
  project = (await call('POST', '/v1/organization/projects', { name: 'capped' })).body.id;
  saKey = (await call('POST', `/v1/organization/projects/${project}/service_accounts`, { name: 'bot' })).body.api_key
    .value;
});
afterAll(() => gw.close());

async function chat(key: string): Promise<{ status: number; code?: string }> {
  const r = await fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], max_tokens: 50 }),
  });
  const body: any = await r.json();
  return { status: r.status, code: body.error?.code };
}

/** What the project's keys spent this month and still hold, by the ledger's own projections. */
async function projectUsed(): Promise<number> {
  await gw.deps.credit.flush();
  const r = await gw.deps.db.query(
    `SELECT (SELECT COALESCE(sum(s.spent_vnd), 0) FROM api_key_spend s JOIN api_keys k ON k.id = s.api_key_id
             WHERE k.project_id = $1 AND s.period LIKE 'month:%')::bigint AS spent`,
    [project],
  );
  return Number(r.rows[0].spent);
}

test("a project's spend limit refuses its keys' requests (402) and no other project's", async () => {
  const set = await call('POST', `/v1/organization/projects/${project}/spend_limit`, {
    threshold_amount: 1,
    currency: 'VND',
    interval: 'month',
  });
  expect(set.body).toMatchObject({ object: 'project.spend_limit', threshold_amount: 1, currency: 'VND' });
  expect((await call('GET', `/v1/organization/projects/${project}/spend_limit`)).body.threshold_amount).toBe(1);
  expect(await chat(saKey)).toEqual({ status: 402, code: 'budget_exceeded' });
  expect((await chat(acc.key)).status).toBe(200);
  const raised = await call('POST', `/v1/organization/projects/${project}/spend_limit`, {
    threshold_amount: 5_000_000,
    currency: 'VND',
    interval: 'month',
  });
  expect(raised.status).toBe(200);
  expect((await chat(saKey)).status).toBe(200);
  expect((await call('DELETE', `/v1/organization/projects/${project}/spend_limit`)).body).toEqual({
    object: 'project.spend_limit.deleted',
    deleted: true,
  });
  expect((await call('GET', `/v1/organization/projects/${project}/spend_limit`)).status).toBe(404);
});

test("under concurrent requests a project's month spend never passes its limit", async () => {
  const before = await projectUsed();
  // A few requests' worth (each costs a VND or two): twelve at once would spend past it unless the ledger refuses.
  const limit = before + 4;
  await call('POST', `/v1/organization/projects/${project}/spend_limit`, {
    threshold_amount: limit,
    currency: 'VND',
    interval: 'month',
  });
  const results = await Promise.all(Array.from({ length: 12 }, () => chat(saKey)));
  for (const r of results) expect([200, 402]).toContain(r.status);
  expect(results.filter((r) => r.status === 402).every((r) => r.code === 'budget_exceeded')).toBe(true);
  expect(results.some((r) => r.status === 200)).toBe(true);
  expect(results.some((r) => r.status === 402)).toBe(true);
  expect(await projectUsed()).toBeLessThanOrEqual(limit);
  await call('DELETE', `/v1/organization/projects/${project}/spend_limit`);
});

test("the organization's spend limit holds for every project's keys", async () => {
  const r = await call('POST', '/v1/organization/spend_limit', {
    threshold_amount: 1,
    currency: 'VND',
    interval: 'month',
  });
  expect(r.body).toMatchObject({ object: 'organization.spend_limit', enforcement: { status: 'enforcing' } });
  expect(await chat(acc.key)).toEqual({ status: 402, code: 'budget_exceeded' });
  expect(await chat(saKey)).toEqual({ status: 402, code: 'budget_exceeded' });
  expect((await call('DELETE', '/v1/organization/spend_limit')).body.deleted).toBe(true);
  expect((await chat(acc.key)).status).toBe(200);
  const log = (await call('GET', '/v1/organization/audit_logs?event_types[]=organization.updated')).body.data;
  expect(log.map((e: any) => e['organization.updated'].changes_requested)).toEqual([
    { spend_limit_vnd: null },
    { spend_limit_vnd: 1 },
  ]);
});

test('bad limits are 400s naming the field', async () => {
  for (const [body, param] of [
    [{ threshold_amount: 0, currency: 'VND', interval: 'month' }, 'threshold_amount'],
    [{ threshold_amount: 1.5, currency: 'VND', interval: 'month' }, 'threshold_amount'],
    [{ threshold_amount: '100', currency: 'VND', interval: 'month' }, 'threshold_amount'],
    [{ threshold_amount: 100, currency: 'USD', interval: 'month' }, 'currency'],
    [{ threshold_amount: 100, currency: 'VND', interval: 'week' }, 'interval'],
  ] as [unknown, string][]) {
    const r = await call('POST', '/v1/organization/spend_limit', body);
    expect([body, r.status, r.body.error.param]).toEqual([body, 400, param]);
  }
  expect((await call('GET', '/v1/organization/spend_limit')).status).toBe(404);
  // Another organization's project is as unknown as a made-up one, and its limit unchanged.
  const other = adminClient(gw.url, (await createAdminKey(gw.deps.db, (await gw.account(0)).accountId)).value);
  const P = `/v1/organization/projects/${project}/spend_limit`;
  const body = { threshold_amount: 1, currency: 'VND', interval: 'month' };
  for (const [method, b] of [['GET'], ['POST', body], ['DELETE']] as [string, unknown?][])
    expect([method, (await other(method, P, b)).status]).toEqual([method, 404]);
  expect((await call('GET', P)).status).toBe(404);
});
