import { randomUUID } from 'node:crypto';
import { createPool, type Db } from '../../src/db/pool';
import { CreditManager, type UsageInput } from '../../src/modelCall/credit';
import { getBalance, InsufficientFunds, placeHold, releaseHold, verifyProjections } from '../../src/billing/ledger';
import { writeUsageBatch, type SettledUsage } from '../../src/billing/usageBatch';
import { tx } from '../../src/db/pool';
import type { Logger } from '../../src/observability/logger';
import { fundedAccount } from '../support/records';

let db: Db;
beforeAll(() => {
  db = createPool(process.env.DATABASE_URL!, 20);
});
afterAll(() => db.end());

const funded = (amount: number) => fundedAccount(db, amount, 'credit-test');
/** The account's `charged` ledger events, oldest first. */
async function chargesOf(
  accountId: string,
): Promise<{ key: string; amount: number; ref_type: string; memo: string }[]> {
  const r = await db.query(
    `SELECT idempotency_key AS key, amount, ref_type, memo FROM ledger_events
     WHERE account_id = $1 AND kind = 'charged' ORDER BY id`,
    [accountId],
  );
  return r.rows;
}
const usage = (op = 'chat'): UsageInput => ({
  id: randomUUID(),
  apiKeyId: null,
  model: 'm',
  operation: op,
  units: { prompt_tokens: 1 },
  latencyMs: 1,
  status: 200,
});

test('concurrent reservations never exceed the balance, across lease extensions', async () => {
  const acc = await funded(10 * 3_000);
  const credit = new CreditManager(db, { leaseVnd: 4_000, flushMs: 10_000 });
  const results = await Promise.allSettled(Array.from({ length: 50 }, () => credit.reserve(acc, 3_000)));
  const ok = results.filter((r) => r.status === 'fulfilled');
  expect(ok).toHaveLength(10);
  expect(results.filter((r) => r.status === 'rejected' && r.reason instanceof InsufficientFunds)).toHaveLength(40);
  for (const r of ok)
    (r as PromiseFulfilledResult<Awaited<ReturnType<CreditManager['reserve']>>>).value.settle(2_500, usage());
  await credit.close();
  expect(await getBalance(db, acc)).toEqual({ balance: 5_000, held: 0, available: 5_000 });
  expect(await verifyProjections(db)).toEqual([]);
  // One flush: one charge for the ten requests settled against the lease, itemised by their usage records.
  const charges = await chargesOf(acc);
  expect(charges).toEqual([
    { key: expect.stringMatching(/^usage:/), amount: 25_000, ref_type: 'usage_batch', memo: '10 requests: chat m ×10' },
  ]);
  const rows = await db.query(
    `SELECT count(*)::int AS n, sum(cost_vnd)::int AS cost, min(charge_key) AS k1, max(charge_key) AS k2
     FROM usage_records WHERE account_id = $1`,
    [acc],
  );
  expect(rows.rows[0]).toEqual({ n: 10, cost: 25_000, k1: charges[0].key, k2: charges[0].key });
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
  // p1 flushes too rarely to give back what p2 recalls: p2 waits its waitMs, then is refused.
  const p2 = new CreditManager(db, { leaseVnd: 100_000, flushMs: 10_000, waitMs: 200 });
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
  await Promise.all(
    procs.map(async (p) => {
      for (let round = 0; round < 15; round++) {
        const rs = await Promise.all(Array.from({ length: 8 }, () => p.reserve(acc, 500)));
        for (const r of rs) charged += r.settle(300, usage());
        await p.flush();
      }
    }),
  );
  await Promise.all(procs.map((p) => p.close()));
  expect(charged).toBe(2 * 15 * 8 * 300);
  expect(await getBalance(db, acc)).toEqual({ balance: 1_000_000 - charged, held: 0, available: 1_000_000 - charged });
  expect(await verifyProjections(db)).toEqual([]);
});

test('a flush charges each lease hold once; a request alone keeps its own key; a replay charges nothing', async () => {
  const acc = await funded(100_000);
  const holdA = randomUUID();
  const holdB = randomUUID();
  await placeHold(db, {
    accountId: acc,
    holdId: holdA,
    amount: 10_000,
    idempotencyKey: `lease:${holdA}:0`,
    refType: 'lease',
    refId: holdA,
  });
  await placeHold(db, {
    accountId: acc,
    holdId: holdB,
    amount: 10_000,
    idempotencyKey: `lease:${holdB}:0`,
    refType: 'lease',
    refId: holdB,
  });
  const on = (holdId: string, cost: number, op = 'chat'): SettledUsage => ({
    usage: usage(op),
    accountId: acc,
    holdId,
    cost,
  });
  const batch = [on(holdA, 100), on(holdA, 250, 'embeddings'), on(holdA, 0), on(holdB, 40), on(holdA, 7)];
  expect(await tx(db, (c) => writeUsageBatch(c, batch))).toBe(397);
  const charges = await chargesOf(acc);
  expect(charges).toEqual(
    expect.arrayContaining([
      {
        key: expect.stringMatching(/^usage:/),
        amount: 357,
        ref_type: 'usage_batch',
        memo: '3 requests: chat m ×2, embeddings m ×1',
      },
      { key: `req:${batch[3].usage.id}`, amount: 40, ref_type: 'request', memo: 'chat m' },
    ]),
  );
  expect(charges).toHaveLength(2);
  const keys = await db.query('SELECT id, charge_key FROM usage_records WHERE account_id = $1', [acc]);
  const keyOf = new Map(keys.rows.map((r) => [r.id as string, r.charge_key as string | null]));
  const batchKey = charges.find((c) => c.ref_type === 'usage_batch')!.key;
  expect(batch.map((s) => keyOf.get(s.usage.id))).toEqual([
    batchKey,
    batchKey,
    null,
    `req:${batch[3].usage.id}`,
    batchKey,
  ]);
  // The same requests again (a flush retried after a commit it did not see acknowledged): nothing more.
  expect(await tx(db, (c) => writeUsageBatch(c, batch))).toBe(0);
  expect(await chargesOf(acc)).toHaveLength(2);
  const holds = await db.query('SELECT id, remaining FROM holds WHERE id = ANY($1::uuid[]) ORDER BY remaining', [
    [holdA, holdB],
  ]);
  expect(holds.rows).toEqual([
    { id: holdA, remaining: 10_000 - 357 },
    { id: holdB, remaining: 10_000 - 40 },
  ]);
  expect(await getBalance(db, acc)).toEqual({ balance: 100_000 - 397, held: 20_000 - 397, available: 80_000 });
  expect(await verifyProjections(db)).toEqual([]);
  // A usage record whose cost its charge does not cover is found by the check.
  await db.query('UPDATE usage_records SET cost_vnd = cost_vnd + 1 WHERE id = $1', [batch[0].usage.id]);
  expect(await verifyProjections(db)).toEqual([
    { accountId: `charge:${batchKey}`, balance: 357, held: 0, rebuiltBalance: 358, rebuiltHeld: 0 },
  ]);
  await db.query('UPDATE usage_records SET cost_vnd = cost_vnd - 1 WHERE id = $1', [batch[0].usage.id]);
});

// The refused one is recorded as uncollected.
test('a charge the ledger refuses blocks no other: each request is written alone', async () => {
  const a = await funded(50_000);
  const b = await funded(50_000);
  const errors: unknown[] = [];
  const logger = { error: (o: unknown) => errors.push(o), warn: () => undefined } as unknown as Logger;
  const credit = new CreditManager(db, { leaseVnd: 10_000, flushMs: 60_000, logger });
  const ra = await credit.reserve(a, 1_000);
  const rb1 = await credit.reserve(b, 1_000);
  const rb2 = await credit.reserve(b, 1_000);
  // a's lease hold is closed behind the manager's back, so its charge is refused at flush.
  const lease = (await db.query(`SELECT id FROM holds WHERE account_id = $1 AND ref_type = 'lease'`, [a])).rows[0]
    .id as string;
  await releaseHold(db, { holdId: lease, idempotencyKey: `test-close:${lease}` });
  const ua = usage();
  ra.settle(600, ua);
  rb1.settle(300, usage());
  rb2.settle(200, usage());
  await credit.flush();
  expect(await chargesOf(a)).toEqual([]);
  expect((await chargesOf(b)).map((c) => c.amount).sort()).toEqual([200, 300]);
  // Recorded without a charge, its whole bill a shortfall with its uncollected event.
  const rowA = await db.query('SELECT cost_vnd, shortfall_vnd, charge_key FROM usage_records WHERE id = $1', [ua.id]);
  expect(rowA.rows).toEqual([{ cost_vnd: 0, shortfall_vnd: 600, charge_key: null }]);
  const un = await db.query(`SELECT amount, hold_id FROM ledger_events WHERE idempotency_key = $1`, [
    `uncollected:${ua.id}`,
  ]);
  expect(un.rows).toEqual([{ amount: 600, hold_id: null }]);
  expect(errors).toEqual(expect.arrayContaining([expect.objectContaining({ requestId: ua.id, cost: 600 })]));
  await credit.close();
  expect(await getBalance(db, a)).toEqual({ balance: 50_000, held: 0, available: 50_000 });
  expect(await getBalance(db, b)).toEqual({ balance: 49_500, held: 0, available: 49_500 });
  expect(await verifyProjections(db)).toEqual([]);
});

test('COPY writes what the per-row path does, odd characters intact; a batch already written fails whole', async () => {
  const acc = await funded(100_000);
  const hold = randomUUID();
  await placeHold(db, {
    accountId: acc,
    holdId: hold,
    amount: 10_000,
    idempotencyKey: `lease:${hold}:0`,
    refType: 'lease',
    refId: hold,
  });
  const odd = (cost: number): SettledUsage => ({
    usage: { ...usage(), model: 'm\\back\tslash\nline\r', units: { prompt_tokens: cost, 'odd\tkey\\': 1 } },
    accountId: acc,
    holdId: hold,
    cost,
  });
  const batch = [odd(5), odd(0), odd(7)];
  expect(await tx(db, (c) => writeUsageBatch(c, batch, { copy: true }))).toBe(12);
  const rows = await db.query(
    'SELECT id, model, units, cost_vnd, charge_key FROM usage_records WHERE account_id = $1',
    [acc],
  );
  const byId = new Map(rows.rows.map((r) => [r.id as string, r]));
  const [charge] = await chargesOf(acc);
  expect(charge).toMatchObject({
    amount: 12,
    ref_type: 'usage_batch',
    memo: '2 requests: chat m\\back\tslash\nline\r ×2',
  });
  for (const s of batch) {
    expect(byId.get(s.usage.id)).toEqual({
      id: s.usage.id,
      model: 'm\\back\tslash\nline\r',
      units: s.usage.units,
      cost_vnd: s.cost,
      charge_key: s.cost > 0 ? charge.key : null,
    });
  }
  const again = await tx(db, (c) => writeUsageBatch(c, batch, { copy: true })).then(
    () => null,
    (e) => e,
  );
  expect(again?.code).toBe('23505');
  expect(await chargesOf(acc)).toHaveLength(1);
  expect(await verifyProjections(db)).toEqual([]);
});

test('a flush whose requests are partly written already (commit not acknowledged) charges only the rest', async () => {
  const acc = await funded(50_000);
  const credit = new CreditManager(db, { leaseVnd: 10_000, flushMs: 60_000 });
  const [r1, r2, r3] = await Promise.all([
    credit.reserve(acc, 1_000),
    credit.reserve(acc, 1_000),
    credit.reserve(acc, 1_000),
  ]);
  const u1 = usage();
  r1.settle(100, u1);
  r2.settle(200, usage());
  r3.settle(300, usage());
  // u1's record and charge landed in an earlier transaction whose commit the manager never heard of.
  const lease = (await db.query(`SELECT id FROM holds WHERE account_id = $1 AND ref_type = 'lease'`, [acc])).rows[0]
    .id as string;
  await tx(db, (c) => writeUsageBatch(c, [{ usage: u1, accountId: acc, holdId: lease, cost: 100 }]));
  await credit.close();
  const charges = await chargesOf(acc);
  expect(charges.map((c) => c.amount).sort((a, b) => a - b)).toEqual([100, 500]);
  expect(await getBalance(db, acc)).toEqual({ balance: 50_000 - 600, held: 0, available: 50_000 - 600 });
  const n = await db.query('SELECT count(*)::int AS n FROM usage_records WHERE account_id = $1', [acc]);
  expect(n.rows[0].n).toBe(3);
  expect(await verifyProjections(db)).toEqual([]);
});
