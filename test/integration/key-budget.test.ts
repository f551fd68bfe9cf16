import { randomUUID } from 'node:crypto';
import { createPool, type Db } from '../../src/db/pool';
import { createAccount, placeFlexibleHold, placeHold, settleHold, topUp, verifyProjections } from '../../src/billing/ledger';
import { BudgetExceeded, keyBudgetRoom, keySpend } from '../../src/billing/budget';
import { createApiKey } from '../../src/auth/apiKeys';
import { BUDGET_FENCE_MARGIN_MS, setAccountLimits, setKeyLimits } from '../../src/limits/keyLimits';
import { tx } from '../../src/db/pool';

/** Key budgets in the ledger: holds through a key (video jobs, budgeted keys' credit leases) against its budget. */

let db: Db;
beforeAll(() => {
  db = createPool(process.env.DATABASE_URL!, 20);
});
afterAll(() => db.end());

async function keyOf(balance: number): Promise<{ accountId: string; keyId: string }> {
  const accountId = await createAccount(db, 'budget-test');
  await topUp(db, { accountId, amount: balance, idempotencyKey: `t:${randomUUID()}` });
  return { accountId, keyId: (await createApiKey(db, accountId, 'k')).id };
}
const hold = (accountId: string, keyId: string, amount: number) =>
  placeHold(db, { accountId, apiKeyId: keyId, holdId: randomUUID(), amount, idempotencyKey: `h:${randomUUID()}`, refType: 'video_job' });

test('open holds and charges through a key count against its budget; the smaller of day and month applies', async () => {
  const { accountId, keyId } = await keyOf(10_000_000);
  await setKeyLimits(db, accountId, keyId, { budgetDayVnd: 100_000, budgetMonthVnd: 150_000 });
  const video = randomUUID();
  await placeHold(db, { accountId, apiKeyId: keyId, holdId: video, amount: 80_000, idempotencyKey: `v:${video}`, refType: 'video_job' });
  // 20.000 left: a lease wanting 30.000 minimum is refused, one that can take 10.000 gets at most a quarter above it.
  await expect(placeFlexibleHold(db, { accountId, apiKeyId: keyId, holdId: randomUUID(), min: 30_000, want: 30_000, idempotencyKey: `l:${randomUUID()}` }))
    .rejects.toBeInstanceOf(BudgetExceeded);
  const granted = await placeFlexibleHold(db, { accountId, apiKeyId: keyId, holdId: randomUUID(), min: 1_000, want: 20_000, idempotencyKey: `l:${randomUUID()}` });
  expect(granted).toBe(5_000);
  // The video settles for 50.000: 30.000 of its hold returns to the budget.
  await settleHold(db, { holdId: video, charge: 50_000, idempotencyKey: `s:${video}` });
  expect((await keySpend(db, [keyId])).get(keyId)).toEqual({ day: 50_000, month: 50_000 });
  expect(await tx(db, (c) => keyBudgetRoom(c, keyId))).toEqual({ room: 100_000 - 50_000 - 5_000, period: 'day' });
  // The month budget (150.000) is now the tighter one once the day's is raised.
  await setKeyLimits(db, accountId, keyId, { budgetDayVnd: 1_000_000 });
  expect(await tx(db, (c) => keyBudgetRoom(c, keyId))).toEqual({ room: 150_000 - 50_000 - 5_000, period: 'month' });
  await expect(hold(accountId, keyId, 95_001)).rejects.toBeInstanceOf(BudgetExceeded);
  await hold(accountId, keyId, 95_000);
  expect(await verifyProjections(db)).toEqual([]);
});

test('account defaults budget keys without their own; concurrent holds never pass the budget', async () => {
  const { accountId, keyId } = await keyOf(10_000_000);
  await setAccountLimits(db, accountId, { budgetDayVnd: 50_000 });
  const results = await Promise.allSettled(Array.from({ length: 40 }, () => hold(accountId, keyId, 3_000)));
  expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(16);
  expect(results.filter((r) => r.status === 'rejected' && r.reason instanceof BudgetExceeded)).toHaveLength(24);
  const other = (await createApiKey(db, accountId, 'other')).id;
  await setKeyLimits(db, accountId, other, { budgetDayVnd: 0 });
  await expect(hold(accountId, other, 1)).rejects.toBeInstanceOf(BudgetExceeded);
  // A hold without a key (and a key without any budget) is not limited by budgets.
  await placeHold(db, { accountId, holdId: randomUUID(), amount: 100_000, idempotencyKey: `n:${randomUUID()}` });
  expect(await verifyProjections(db)).toEqual([]);
});

test('verifyProjections finds a key spend that does not match the charges', async () => {
  const { keyId } = await keyOf(1_000);
  await db.query(`INSERT INTO api_key_spend (api_key_id, period, spent_vnd) VALUES ($1, 'day:2000-01-01', 5)`, [keyId]);
  const found = await verifyProjections(db);
  expect(found).toEqual([{ accountId: `key-spend:${keyId}:day:2000-01-01`, balance: 5, held: 0, rebuiltBalance: 0, rebuiltHeld: 0 }]);
  await db.query(`DELETE FROM api_key_spend WHERE api_key_id = $1`, [keyId]);
});

test('spend through an account\'s shared lease counts towards the key\'s budget periods too', async () => {
  const { CreditManager } = await import('../../src/billing/credit');
  const { accountId, keyId } = await keyOf(100_000);
  const credit = new CreditManager(db, { leaseVnd: 20_000, flushMs: 60_000 });
  const usage = () => ({ id: randomUUID(), apiKeyId: keyId, model: 'm', operation: 'chat.completions', units: { prompt_tokens: 1 }, latencyMs: 1, status: 200 });
  for (let i = 0; i < 3; i++) (await credit.reserve(accountId, 1_000)).settle(700, usage());
  (await credit.reserve(accountId, 1_000)).settle(50, { ...usage(), apiKeyId: null });
  await credit.close();
  expect((await keySpend(db, [keyId])).get(keyId)).toEqual({ day: 2_100, month: 2_100 });
  // A budget set now starts from that spend.
  await setKeyLimits(db, accountId, keyId, { budgetDayVnd: 3_000 });
  expect(await tx(db, (c) => keyBudgetRoom(c, keyId))).toEqual({ room: 900, period: 'day' });
  expect(await verifyProjections(db)).toEqual([]);
});

test('a budget set while shared leases are open counts them (they may carry requests of the key) until they are released', async () => {
  const { accountId, keyId } = await keyOf(1_000_000);
  const lease = (holdId: string, want: number) => placeFlexibleHold(db, { accountId, holdId, min: 1, want, idempotencyKey: `l:${randomUUID()}`, refType: 'lease', refId: holdId });
  const before = randomUUID();
  expect(await lease(before, 20_000)).toBe(20_000);
  await setKeyLimits(db, accountId, keyId, { budgetDayVnd: 50_000 }, 100);
  // Placed after the change but before its fence: a process may still serve the key from it on cached settings.
  const during = randomUUID();
  expect(await lease(during, 5_000)).toBe(5_000);
  expect(await tx(db, (c) => keyBudgetRoom(c, keyId))).toEqual({ room: 25_000, period: 'day' });
  await new Promise((r) => setTimeout(r, 100 + BUDGET_FENCE_MARGIN_MS));
  // After the fence no process serves the key from a shared lease: a new one does not count, a key hold does.
  const after = randomUUID();
  expect(await lease(after, 7_000)).toBe(7_000);
  expect(await tx(db, (c) => keyBudgetRoom(c, keyId))).toEqual({ room: 25_000, period: 'day' });
  await settleHold(db, { holdId: before, charge: 1_000, idempotencyKey: `s:${before}` });
  expect(await tx(db, (c) => keyBudgetRoom(c, keyId))).toEqual({ room: 45_000, period: 'day' });
  await settleHold(db, { holdId: during, charge: 0, idempotencyKey: `s:${during}` });
  expect(await tx(db, (c) => keyBudgetRoom(c, keyId))).toEqual({ room: 50_000, period: 'day' });
  // Another key's budget change moves the fence again; a key whose budget is removed has no room to compute.
  const other = (await createApiKey(db, accountId, 'other')).id;
  await setKeyLimits(db, accountId, other, { budgetMonthVnd: 1_000 }, 100);
  expect(await tx(db, (c) => keyBudgetRoom(c, keyId))).toEqual({ room: 43_000, period: 'day' });
  await setKeyLimits(db, accountId, keyId, { budgetDayVnd: null }, 100);
  expect(await tx(db, (c) => keyBudgetRoom(c, keyId))).toBeNull();
  await settleHold(db, { holdId: after, charge: 0, idempotencyKey: `s:${after}` });
  expect(await verifyProjections(db)).toEqual([]);
});
