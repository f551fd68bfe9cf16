import { randomUUID } from 'node:crypto';
import { createPool, type Db } from '../../src/db/pool';
import {
  createAccount,
  placeFlexibleHold,
  placeHold,
  releaseHold,
  settleHold,
  topUp,
  verifyProjections,
} from '../../src/billing/ledger';
import {
  BudgetExceeded,
  budgetPeriodsAt,
  DEFAULT_BUDGET_TIME_ZONE,
  keyBudgetRoom,
  keySpend,
  setBudgetTimeZone,
} from '../../src/billing/budget';
import { createApiKey } from '../../src/auth/apiKeys';
import { BUDGET_FENCE_MARGIN_MS, setAccountLimits, setKeyLimits } from '../../src/limits/keyLimits';
import { tx } from '../../src/db/pool';
import { withScratchDatabase } from '../support/scratchDatabase';
import { migrate } from '../../src/db/migrate';

/** Key budgets in the ledger: holds through a key (video jobs, budgeted keys' credit leases) against its budget. */

let db: Db;
beforeAll(() => {
  db = createPool(process.env.DATABASE_URL!, 20);
});
afterAll(async () => {
  // Holds for video jobs that never exist: released, so the shared database keeps no hold of a missing job (which
  // verify-ledger, run by other files on this database, reports as stranded).
  const open = await db.query("SELECT id FROM holds WHERE id = ANY($1) AND status = 'open'", [jobHolds]);
  for (const r of open.rows) await releaseHold(db, { holdId: r.id, idempotencyKey: `r:${r.id}` });
  await db.end();
});

async function keyOf(balance: number, on: Db = db): Promise<{ accountId: string; keyId: string }> {
  const accountId = await createAccount(on, 'budget-test');
  await topUp(on, { accountId, amount: balance, idempotencyKey: `t:${randomUUID()}` });
  return { accountId, keyId: (await createApiKey(on, accountId, 'k')).id };
}

/**
 * A database of its own for a test that charges under other budget zones: the run's shared database is checked
 * by verifyProjections in the configured zone, where those periods would read as mismatches.
 */
async function withZonesDatabase(run: (scratch: Db) => Promise<void>): Promise<void> {
  await withScratchDatabase('zones', async (url) => {
    const scratch = createPool(url, 4);
    try {
      await migrate(url);
      await run(scratch);
    } finally {
      await scratch.end();
    }
  });
}
/** The ids of the holds `hold` placed (for video jobs that never exist): released after the file's tests. */
const jobHolds: string[] = [];
const hold = (accountId: string, keyId: string, amount: number) => {
  const holdId = randomUUID();
  jobHolds.push(holdId);
  return placeHold(db, {
    accountId,
    apiKeyId: keyId,
    holdId,
    amount,
    idempotencyKey: `h:${randomUUID()}`,
    refType: 'video_job',
  });
};

test('open holds and charges through a key count against its budget; the smaller of day and month rules', async () => {
  const { accountId, keyId } = await keyOf(10_000_000);
  await setKeyLimits(db, accountId, keyId, { budgetDayVnd: 100_000, budgetMonthVnd: 150_000 });
  const video = randomUUID();
  await placeHold(db, {
    accountId,
    apiKeyId: keyId,
    holdId: video,
    amount: 80_000,
    idempotencyKey: `v:${video}`,
    refType: 'video_job',
  });
  // 20.000 left: a lease wanting 30.000 minimum is refused, one that can take 10.000 gets at most a quarter above it.
  await expect(
    placeFlexibleHold(db, {
      accountId,
      apiKeyId: keyId,
      holdId: randomUUID(),
      min: 30_000,
      want: 30_000,
      idempotencyKey: `l:${randomUUID()}`,
    }),
  ).rejects.toBeInstanceOf(BudgetExceeded);
  const granted = await placeFlexibleHold(db, {
    accountId,
    apiKeyId: keyId,
    holdId: randomUUID(),
    min: 1_000,
    want: 20_000,
    idempotencyKey: `l:${randomUUID()}`,
  });
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
  expect(found).toEqual([
    { accountId: `key-spend:${keyId}:day:2000-01-01`, balance: 5, held: 0, rebuiltBalance: 0, rebuiltHeld: 0 },
  ]);
  await db.query(`DELETE FROM api_key_spend WHERE api_key_id = $1`, [keyId]);
});

test("spend through an account's shared lease counts towards the key's budget periods too", async () => {
  const { CreditManager } = await import('../../src/modelCall/credit');
  const { accountId, keyId } = await keyOf(100_000);
  const credit = new CreditManager(db, { leaseVnd: 20_000, flushMs: 60_000 });
  const usage = () => ({
    id: randomUUID(),
    apiKeyId: keyId,
    model: 'm',
    operation: 'chat.completions',
    units: { prompt_tokens: 1 },
    latencyMs: 1,
    status: 200,
  });
  for (let i = 0; i < 3; i++) (await credit.reserve(accountId, 1_000)).settle(700, usage());
  (await credit.reserve(accountId, 1_000)).settle(50, { ...usage(), apiKeyId: null });
  await credit.close();
  expect((await keySpend(db, [keyId])).get(keyId)).toEqual({ day: 2_100, month: 2_100 });
  // A budget set now starts from that spend.
  await setKeyLimits(db, accountId, keyId, { budgetDayVnd: 3_000 });
  expect(await tx(db, (c) => keyBudgetRoom(c, keyId))).toEqual({ room: 900, period: 'day' });
  expect(await verifyProjections(db)).toEqual([]);
});

test("a budget set while shared leases are open counts them (they may carry the key's requests)", async () => {
  const { accountId, keyId } = await keyOf(1_000_000);
  const lease = (holdId: string, want: number) =>
    placeFlexibleHold(db, {
      accountId,
      holdId,
      min: 1,
      want,
      idempotencyKey: `l:${randomUUID()}`,
      refType: 'lease',
      refId: holdId,
    });
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

describe('BUDGET_TIME_ZONE moves the period boundaries', () => {
  afterEach(() => setBudgetTimeZone(DEFAULT_BUDGET_TIME_ZONE));

  test('23:30 UTC is still that day in UTC and the next day (and month) in Asia/Ho_Chi_Minh (UTC+7)', async () => {
    const lateUtc = new Date('2025-01-31T23:30:00Z');
    setBudgetTimeZone('UTC');
    expect(await budgetPeriodsAt(db, lateUtc)).toEqual({ day: 'day:2025-01-31', month: 'month:2025-01' });
    expect(await budgetPeriodsAt(db, new Date('2025-02-01T00:00:00Z'))).toEqual({
      day: 'day:2025-02-01',
      month: 'month:2025-02',
    });
    setBudgetTimeZone('Asia/Ho_Chi_Minh');
    expect(await budgetPeriodsAt(db, lateUtc)).toEqual({ day: 'day:2025-02-01', month: 'month:2025-02' });
    // Its midnight is 17:00 UTC the day before.
    expect(await budgetPeriodsAt(db, new Date('2025-01-31T16:59:59Z'))).toEqual({
      day: 'day:2025-01-31',
      month: 'month:2025-01',
    });
    expect(await budgetPeriodsAt(db, new Date('2025-01-31T17:00:00Z'))).toEqual({
      day: 'day:2025-02-01',
      month: 'month:2025-02',
    });
    // A zone west of UTC the other way: 02:00 UTC on the 1st is still the previous day and month in New York.
    setBudgetTimeZone('America/New_York');
    expect(await budgetPeriodsAt(db, new Date('2025-03-01T02:00:00Z'))).toEqual({
      day: 'day:2025-02-28',
      month: 'month:2025-02',
    });
  });

  test('the ledger writes a charge into the period of the configured zone', async () => {
    await withZonesDatabase(async (zdb) => {
      for (const zone of ['UTC', 'Asia/Ho_Chi_Minh', 'Pacific/Kiritimati']) {
        setBudgetTimeZone(zone);
        const { accountId, keyId } = await keyOf(10_000, zdb);
        const before = (await zdb.query('SELECT now() AS t')).rows[0].t as Date;
        const h = randomUUID();
        await placeHold(zdb, {
          accountId,
          apiKeyId: keyId,
          holdId: h,
          amount: 100,
          idempotencyKey: `h:${h}`,
          refType: 'video_job',
        });
        await settleHold(zdb, { holdId: h, charge: 60, idempotencyKey: `s:${h}` });
        const after = (await zdb.query('SELECT now() AS t')).rows[0].t as Date;
        const rows = (
          await zdb.query('SELECT period FROM api_key_spend WHERE api_key_id = $1 ORDER BY period', [keyId])
        ).rows.map((r) => r.period);
        const expected = [await budgetPeriodsAt(zdb, before), await budgetPeriodsAt(zdb, after)].map((p) => [
          p.day,
          p.month,
        ]);
        expect(expected).toContainEqual(rows);
        expect((await keySpend(zdb, [keyId])).get(keyId)).toEqual({ day: 60, month: 60 });
      }
    });
  });
});

test('only a changed budget moves the fence and has its saving wait for it', async () => {
  const { accountId, keyId } = await keyOf(1_000);
  const fence = async () =>
    (await db.query('SELECT budget_fence_at FROM accounts WHERE id = $1', [accountId])).rows[0]
      .budget_fence_at as Date | null;
  expect(await setKeyLimits(db, accountId, keyId, { rpm: 5, budgetDayVnd: null }, 100)).toEqual({ bindsInMs: 0 });
  expect(await fence()).toBeNull();
  expect(await setKeyLimits(db, accountId, keyId, { budgetDayVnd: 500 }, 100)).toEqual({
    bindsInMs: 100 + BUDGET_FENCE_MARGIN_MS,
  });
  const first = await fence();
  expect(first).not.toBeNull();
  expect(await setKeyLimits(db, accountId, keyId, { rpm: 6, budgetDayVnd: 500 }, 100)).toEqual({ bindsInMs: 0 });
  expect(await fence()).toEqual(first);
  expect(await setAccountLimits(db, accountId, { budgetMonthVnd: 9_000 }, 100)).toEqual({
    bindsInMs: 100 + BUDGET_FENCE_MARGIN_MS,
  });
  expect((await fence())!.getTime()).toBeGreaterThanOrEqual(first!.getTime());
  expect(await setKeyLimits(db, accountId, randomUUID(), { rpm: 1 })).toBe(false);
  expect(await setAccountLimits(db, randomUUID(), { rpm: 1 })).toBe(false);
});
