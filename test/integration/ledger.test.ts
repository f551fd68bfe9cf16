import { randomUUID } from 'node:crypto';
import { createPool, type Db } from '../../src/db/pool';
import {
  getBalance,
  InsufficientFunds,
  listLedger,
  placeHold,
  releaseHold,
  settleHold,
  topUp,
  verifyProjections,
  chargeHolds,
} from '../../src/billing/ledger';
import { fundedAccount } from '../support/records';

let db: Db;
beforeAll(() => {
  db = createPool(process.env.DATABASE_URL!, 60);
});
afterAll(() => db.end());

const funded = (amount: number) => fundedAccount(db, amount, 'ledger-test');

test('50 concurrent holds against a balance that covers 10 place exactly 10', async () => {
  const acc = await funded(10 * 7_000);
  const results = await Promise.allSettled(
    Array.from({ length: 50 }, () =>
      placeHold(db, { accountId: acc, holdId: randomUUID(), amount: 7_000, idempotencyKey: `h:${randomUUID()}` }),
    ),
  );
  const ok = results.filter((r) => r.status === 'fulfilled').length;
  const refused = results.filter((r) => r.status === 'rejected' && r.reason instanceof InsufficientFunds).length;
  expect(ok).toBe(10);
  expect(refused).toBe(40);
  expect(await getBalance(db, acc)).toEqual({ balance: 70_000, held: 70_000, available: 0 });
  expect(await verifyProjections(db)).toEqual([]);
});

test('a replayed event changes nothing', async () => {
  const acc = await funded(1_000);
  const key = `topup:${randomUUID()}`;
  expect((await topUp(db, { accountId: acc, amount: 500, idempotencyKey: key })).applied).toBe(true);
  expect((await topUp(db, { accountId: acc, amount: 500, idempotencyKey: key })).applied).toBe(false);
  const holdId = randomUUID();
  const hk = `hold:${holdId}`;
  await placeHold(db, { accountId: acc, holdId, amount: 800, idempotencyKey: hk });
  expect((await placeHold(db, { accountId: acc, holdId, amount: 800, idempotencyKey: hk })).applied).toBe(false);
  const s1 = await settleHold(db, { holdId, charge: 300, idempotencyKey: `settle:${holdId}` });
  const s2 = await settleHold(db, { holdId, charge: 300, idempotencyKey: `settle:${holdId}` });
  expect(s1).toEqual({ charged: 300, released: 500 });
  expect(s2).toEqual({ charged: 0, released: 0 });
  expect((await releaseHold(db, { holdId, idempotencyKey: `rel:${holdId}` })).applied).toBe(false);
  expect(await getBalance(db, acc)).toEqual({ balance: 1_200, held: 0, available: 1_200 });
  const kinds = (await listLedger(db, acc)).map((e) => e.kind);
  expect(kinds).toEqual(['hold_released', 'charged', 'hold_placed', 'topped_up', 'topped_up']);
  expect(await verifyProjections(db)).toEqual([]);
});

test('charges are limited to the hold and replays of charges are skipped', async () => {
  const acc = await funded(5_000);
  const holdId = randomUUID();
  await placeHold(db, { accountId: acc, holdId, amount: 2_000, idempotencyKey: `h:${holdId}` });
  expect(
    await chargeHolds(db, [
      { holdId, amount: 1_500, idempotencyKey: `c1:${holdId}` },
      { holdId, amount: 1_500, idempotencyKey: `c1:${holdId}` },
    ]),
  ).toBe(1);
  await expect(chargeHolds(db, [{ holdId, amount: 600, idempotencyKey: `c2:${holdId}` }])).rejects.toThrow(/exceeds/);
  expect(await getBalance(db, acc)).toEqual({ balance: 3_500, held: 500, available: 3_000 });
});

test('projections equal a rebuild from the events after mixed concurrent traffic', async () => {
  const acc = await funded(100_000);
  await Promise.all(
    Array.from({ length: 30 }, async (_, i) => {
      const holdId = randomUUID();
      try {
        await placeHold(db, { accountId: acc, holdId, amount: 5_000, idempotencyKey: `h:${holdId}` });
      } catch (e) {
        if (e instanceof InsufficientFunds) return;
        throw e;
      }
      if (i % 3 === 0) await releaseHold(db, { holdId, idempotencyKey: `r:${holdId}` });
      else await settleHold(db, { holdId, charge: 1_000 * (i % 5), idempotencyKey: `s:${holdId}` });
    }),
  );
  expect(await verifyProjections(db)).toEqual([]);
  const b = await getBalance(db, acc);
  expect(b!.held).toBe(0);
  // A tampered projection is detected.
  await db.query('UPDATE accounts SET balance = balance + 1 WHERE id = $1', [acc]);
  expect((await verifyProjections(db)).map((m) => m.accountId)).toContain(acc);
  await db.query('UPDATE accounts SET balance = balance - 1 WHERE id = $1', [acc]);
});

test('a batch over several holds and accounts moves each projection by its new charges only', async () => {
  const a = await funded(10_000);
  const b = await funded(10_000);
  const [ha1, ha2, hb] = [randomUUID(), randomUUID(), randomUUID()];
  await placeHold(db, { accountId: a, holdId: ha1, amount: 3_000, idempotencyKey: `h:${ha1}` });
  await placeHold(db, { accountId: a, holdId: ha2, amount: 3_000, idempotencyKey: `h:${ha2}` });
  await placeHold(db, { accountId: b, holdId: hb, amount: 3_000, idempotencyKey: `h:${hb}` });
  expect(await chargeHolds(db, [{ holdId: ha1, amount: 100, idempotencyKey: `old:${ha1}` }])).toBe(1);
  const applied = await chargeHolds(db, [
    { holdId: ha1, amount: 100, idempotencyKey: `old:${ha1}` }, // replayed from the earlier batch: skipped
    { holdId: ha1, amount: 200, idempotencyKey: `n1:${ha1}` },
    { holdId: ha2, amount: 300, idempotencyKey: `n2:${ha2}` },
    { holdId: ha2, amount: 400, idempotencyKey: `n3:${ha2}` },
    { holdId: hb, amount: 500, idempotencyKey: `n4:${hb}` },
    { holdId: hb, amount: 500, idempotencyKey: `n4:${hb}` }, // repeated inside the batch: once
  ]);
  expect(applied).toBe(4);
  expect(await getBalance(db, a)).toEqual({
    balance: 10_000 - 100 - 200 - 300 - 400,
    held: 6_000 - 1_000,
    available: 10_000 - 1_000 - 5_000,
  });
  expect(await getBalance(db, b)).toEqual({ balance: 9_500, held: 2_500, available: 7_000 });
  expect(await verifyProjections(db)).toEqual([]);
});

test('the database refuses to change or remove a ledger event (append-only)', async () => {
  const acc = await funded(1_000);
  const before = await listLedger(db, acc, 10);
  expect(before).toHaveLength(1);
  const id = before[0].id;
  for (const sql of [
    'UPDATE ledger_events SET amount = amount + 1 WHERE id = $1',
    'UPDATE ledger_events SET memo = memo WHERE id = $1',
    'DELETE FROM ledger_events WHERE id = $1',
  ])
    await expect(db.query(sql, [id])).rejects.toMatchObject({ code: '23001' });
  // In a transaction rolled back whatever happens: a TRUNCATE let through must not empty the shared test database.
  const c = await db.connect();
  try {
    await c.query('BEGIN');
    await expect(c.query('TRUNCATE ledger_events')).rejects.toMatchObject({ code: '23001' });
  } finally {
    await c.query('ROLLBACK');
    c.release();
  }
  expect(await listLedger(db, acc, 10)).toEqual(before);
  expect(await verifyProjections(db)).toEqual([]);
});
