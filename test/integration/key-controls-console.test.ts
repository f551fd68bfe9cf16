import OpenAI from 'openai';
import { startGateway, type TestGateway } from '../support/gateway';
import { ConsoleClient, jsonOf, makeLogin } from '../e2e/consoleClient';
import { runAdmin } from '../../src/cli/admin';

/**
 * Setting and reading per-key controls: the customer console's API Keys section, the operator pages and the admin
 * CLI, against the real gateway and Postgres; what they show is what the API then enforces.
 */
let gw: TestGateway;
beforeAll(async () => {
  gw = await startGateway({ logLevel: 'silent' }, { temporal: false });
});
afterAll(() => gw.close());

async function signedIn(accountId: string, role: 'customer' | 'operator' = 'customer') {
  const login = await makeLogin(gw, accountId, role);
  const c = new ConsoleClient(gw.url);
  expect((await c.signIn(login.email, login.password)).status).toBe(200);
  return c;
}
const chat = (key: string) =>
  new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0 }).chat.completions.create({
    model: 'gpt-4o-mini',
    messages: [{ role: 'user', content: 'hi' }],
    max_tokens: 10,
  });

test("a customer sets a key's limits in the console, sees its usage in the window and period spend", async () => {
  const acc = await gw.account(1_000_000);
  const c = await signedIn(acc.accountId);
  const set = await c.json('PATCH', `/console/api/keys/${acc.keyId}/limits`, {
    rpm: 3,
    tpm: 50_000,
    budgetDayVnd: 500_000,
    expiresAt: '2099-12-31T23:59:59+07:00',
  });
  expect(set).toMatchObject({
    id: acc.keyId,
    limits: { rpm: 3, tpm: 50_000, budgetDayVnd: 500_000, budgetMonthVnd: null },
    expiresAt: '2099-12-31T16:59:59.000Z',
  });
  await new Promise((r) => setTimeout(r, 600)); // the key cache (500 ms in tests)
  for (let i = 0; i < 2; i++) await chat(acc.key);
  const view = await c.json('GET', '/console/api/keys');
  expect(view).toMatchObject({
    budgetTimeZone: 'Asia/Ho_Chi_Minh',
    windowSeconds: 60,
    defaults: { rpm: null, tpm: null, budgetDayVnd: null, budgetMonthVnd: null },
  });
  const k = view.data.find((x: { id: string }) => x.id === acc.keyId);
  expect(k.effective).toEqual({ rpm: 3, tpm: 50_000, budgetDayVnd: 500_000, budgetMonthVnd: null });
  expect(k.usage.requests).toBe(2);
  expect(k.usage.tokens).toBeGreaterThan(0);
  const spent = (
    await gw.deps.db.query('SELECT sum(cost_vnd)::int AS v FROM usage_records WHERE api_key_id = $1', [acc.keyId])
  ).rows[0].v;
  expect(k.spend).toEqual({ day: spent, month: spent });

  // Bad input is a 400 naming the field, and changes nothing.
  for (const bad of [
    { rpm: 0 },
    { rpm: 1.5 },
    { budgetDayVnd: -1 },
    { tmp: 5 },
    { expiresAt: 'tomorrow' },
    { rpm: '5' },
  ]) {
    const r = await c.request('PATCH', `/console/api/keys/${acc.keyId}/limits`, bad);
    expect(r.status).toBe(400);
    expect((await jsonOf(r)).error.type).toBe('invalid_request_error');
  }
  expect(
    (await c.json('GET', '/console/api/keys')).data.find((x: { id: string }) => x.id === acc.keyId).limits.rpm,
  ).toBe(3);
  // Another account's key is not found.
  const other = await gw.account(0);
  expect((await c.request('PATCH', `/console/api/keys/${other.keyId}/limits`, { rpm: 1 })).status).toBe(404);
  // null clears a value.
  expect((await c.json('PATCH', `/console/api/keys/${acc.keyId}/limits`, { rpm: null })).limits.rpm).toBeNull();
});

test("operators set account defaults and any key's limits; customers cannot use the operator pages", async () => {
  const acc = await gw.account(1_000_000);
  const op = await signedIn((await gw.account(0)).accountId, 'operator');
  const defaults = await op.json('PATCH', `/console/api/admin/accounts/${acc.accountId}/limits`, {
    rpm: 1,
    budgetMonthVnd: 9_000_000,
  });
  expect(defaults.defaults).toEqual({ rpm: 1, tpm: null, budgetDayVnd: null, budgetMonthVnd: 9_000_000 });
  expect(defaults.data[0].effective).toMatchObject({ rpm: 1, budgetMonthVnd: 9_000_000 });
  expect(
    (await op.request('PATCH', `/console/api/admin/accounts/${acc.accountId}/limits`, { expiresAt: null })).status,
  ).toBe(400);
  const key = await op.json('PATCH', `/console/api/admin/accounts/${acc.accountId}/keys/${acc.keyId}/limits`, {
    rpm: 2,
  });
  expect(key.effective.rpm).toBe(2);
  await new Promise((r) => setTimeout(r, 600));
  await chat(acc.key);
  await chat(acc.key);
  const refused = await chat(acc.key).catch((e) => e);
  expect(refused.status).toBe(429);
  const listed = await op.json('GET', `/console/api/admin/accounts/${acc.accountId}/keys`);
  expect(listed.data[0].usage.requests).toBe(2);
  const cust = await signedIn(acc.accountId);
  expect((await cust.request('GET', `/console/api/admin/accounts/${acc.accountId}/keys`)).status).toBe(403);
});

test('the admin CLI sets and lists key limits, defaults and expiry; bad values exit 2, change nothing', async () => {
  const acc = await gw.account(1_000_000);
  const run = async (...argv: string[]) => {
    const out: string[] = [];
    const err: string[] = [];
    const code = await runAdmin(argv, { out: (l) => out.push(l), err: (l) => err.push(l), env: process.env });
    return { code, out: out.join('\n'), err: err.join('\n') };
  };
  const set = await run(
    'set-key-limits',
    acc.accountId,
    acc.keyId,
    '--rpm',
    '60',
    '--tpm',
    '200000',
    '--budget-day',
    '500_000',
    '--expires',
    '2099-01-01T00:00:00Z',
    '--json',
  );
  expect(set.code).toBe(0);
  expect(JSON.parse(set.out)).toMatchObject({
    effective_limits: { rpm: 60, tpm: 200_000, budgetDayVnd: 500_000, budgetMonthVnd: null },
    expires_at: '2099-01-01T00:00:00.000Z',
  });
  const defaults = await run('set-account-limits', acc.accountId, '--budget-month', '10_000_000');
  expect(defaults.code).toBe(0);
  expect(defaults.out).toContain('10.000.000 ₫/month');
  const list = await run('list-keys', acc.accountId);
  expect(list.out).toMatch(/60 rpm, 200000 tpm, 500\.000 ₫\/day, 10\.000\.000 ₫\/month/);
  for (const bad of [['--rpm', '0'], ['--rpm', 'many'], ['--budget-day', '1.5'], ['--expires', 'soon'], []]) {
    const r = await run('set-key-limits', acc.accountId, acc.keyId, ...bad);
    expect(r.code).toBe(2);
  }
  expect((await run('set-account-limits', acc.accountId, '--expires', '2099-01-01')).code).toBe(2);
  const after = JSON.parse((await run('list-keys', acc.accountId, '--json')).out);
  expect(after[0].limits).toEqual({ rpm: 60, tpm: 200_000, budgetDayVnd: 500_000, budgetMonthVnd: null });
  expect((await run('set-key-limits', acc.accountId, acc.keyId, '--rpm', 'none', '--json')).code).toBe(0);
  expect(JSON.parse((await run('list-keys', acc.accountId, '--json')).out)[0].limits.rpm).toBeNull();
});
