import { randomUUID } from 'node:crypto';
import { createPool, type Db } from '../../src/db/pool';
import { CreditManager, type UsageInput } from '../../src/billing/credit';
import { createAccount, getBalance, InsufficientFunds, listLedger, topUp, verifyProjections } from '../../src/billing/ledger';

let db: Db;
beforeAll(() => {
  db = createPool(process.env.DATABASE_URL!, 20);
});
afterAll(() => db.end());

async function funded(amount: number): Promise<string> {
  const id = await createAccount(db, 'credit-test');
  await topUp(db, { accountId: id, amount, idempotencyKey: `t:${randomUUID()}` });
  return id;
}
const usage = (op = 'chat'): UsageInput => ({ id: randomUUID(), apiKeyId: null, model: 'm', operation: op, units: { prompt_tokens: 1 }, latencyMs: 1, status: 200 });

test('concurrent reservations never exceed the balance, across lease extensions', async () => {
  const acc = await funded(10 * 3_000);
  const credit = new CreditManager(db, { leaseVnd: 4_000, flushMs: 10_000 });
  const results = await Promise.allSettled(Array.from({ length: 50 }, () => credit.reserve(acc, 3_000)));
  const ok = results.filter((r) => r.status === 'fulfilled');
  expect(ok).toHaveLength(10);
  expect(results.filter((r) => r.status === 'rejected' && r.reason instanceof InsufficientFunds)).toHaveLength(40);
  for (const r of ok) (r as PromiseFulfilledResult<Awaited<ReturnType<CreditManager['reserve']>>>).value.settle(2_500, usage());
  await credit.close();
  expect(await getBalance(db, acc)).toEqual({ balance: 5_000, held: 0, available: 5_000 });
  expect(await verifyProjections(db)).toEqual([]);
  const charges = (await listLedger(db, acc, 100)).filter((e) => e.kind === 'charged');
  expect(charges).toHaveLength(10);
  expect(charges.every((c) => c.amount === 2_500 && c.refType === 'request')).toBe(true);
  const rows = await db.query('SELECT count(*)::int AS n, sum(cost_vnd)::int AS cost FROM usage_records WHERE account_id = $1', [acc]);
  expect(rows.rows[0]).toEqual({ n: 10, cost: 25_000 });
});

test('settle and cancel act once; cancel charges nothing; unused reservation returns to the account', async () => {
  const acc = await funded(10_000);
  const credit = new CreditManager(db, { leaseVnd: 1_000_000, flushMs: 10_000 });
  const a = await credit.reserve(acc, 4_000);
  const b = await credit.reserve(acc, 4_000);
  await expect(credit.reserve(acc, 4_000)).rejects.toBeInstanceOf(InsufficientFunds);
  const u = usage();
  expect(a.settle(1_234, u)).toBe(1_234);
  expect(a.settle(1_234, u)).toBe(0);
  b.cancel(usage());
  b.cancel(usage());
  await credit.flush();
  const mid = await getBalance(db, acc);
  expect(mid!.balance).toBe(10_000 - 1_234);
  await credit.close();
  expect(await getBalance(db, acc)).toEqual({ balance: 8_766, held: 0, available: 8_766 });
  expect(await verifyProjections(db)).toEqual([]);
});

test('a second process sees funds held by the first process lease', async () => {
  const acc = await funded(5_000);
  const p1 = new CreditManager(db, { leaseVnd: 100_000, flushMs: 10_000 });
  const p2 = new CreditManager(db, { leaseVnd: 100_000, flushMs: 10_000 });
  const r1 = await p1.reserve(acc, 3_000);
  await expect(p2.reserve(acc, 3_000)).rejects.toBeInstanceOf(InsufficientFunds);
  r1.settle(3_000, usage());
  await p1.close();
  const r2 = await p2.reserve(acc, 2_000);
  r2.settle(2_000, usage());
  await p2.close();
  expect(await getBalance(db, acc)).toEqual({ balance: 0, held: 0, available: 0 });
  expect(await verifyProjections(db)).toEqual([]);
});

test('extensions, flushes and releases from two processes interleave without deadlock or drift', async () => {
  const acc = await funded(1_000_000);
  const mk = () => new CreditManager(db, { leaseVnd: 700, flushMs: 5, idleReleaseMs: 1 });
  const procs = [mk(), mk()];
  let charged = 0;
  await Promise.all(procs.map(async (p) => {
    for (let round = 0; round < 15; round++) {
      const rs = await Promise.all(Array.from({ length: 8 }, () => p.reserve(acc, 500)));
      for (const r of rs) charged += r.settle(300, usage());
      await p.flush();
    }
  }));
  await Promise.all(procs.map((p) => p.close()));
  expect(charged).toBe(2 * 15 * 8 * 300);
  expect(await getBalance(db, acc)).toEqual({ balance: 1_000_000 - charged, held: 0, available: 1_000_000 - charged });
  expect(await verifyProjections(db)).toEqual([]);
});
