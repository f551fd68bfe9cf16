import { randomUUID } from 'node:crypto';
import type { Db, DbClient } from '../db';
import { tx } from '../db';
import { addKeySpend, BudgetExceeded, budgetTimeZone, keyBudgetRoom } from './budget';

/**
 * The VND ledger. Every change is an append-only event in ledger_events with a unique idempotency key, and the
 * projections (accounts.balance/held, holds.remaining) change in the same transaction. A replayed event (same
 * key) inserts nothing and changes nothing: the insert of the event is what gates every projection update.
 */

export class InsufficientFunds extends Error {
  constructor(
    public readonly needed: number,
    public readonly available: number,
  ) {
    super(`insufficient balance: ${needed} VND needed, ${available} VND available`);
  }
}
export class LedgerError extends Error {}

/**
 * `uncollected`: VND of a request's bill its account could not cover (its usage record's shortfall); it moves
 * neither balance nor held.
 */
export type EventKind = 'topped_up' | 'hold_placed' | 'hold_released' | 'charged' | 'uncollected';
export interface Ref {
  refType?: string;
  refId?: string;
}

export interface Balance {
  balance: number;
  held: number;
  available: number;
}

export interface LedgerEntry {
  id: number;
  kind: EventKind;
  amount: number;
  holdId: string | null;
  refType: string | null;
  refId: string | null;
  memo: string | null;
  createdAt: string;
}

function assertVnd(amount: number, what: string, allowZero = false): void {
  if (!Number.isSafeInteger(amount) || amount < 0 || (!allowZero && amount === 0)) {
    throw new LedgerError(`${what} must be a positive integer VND amount, got ${amount}`);
  }
}

async function insertEvent(
  c: DbClient,
  e: { accountId: string; kind: EventKind; amount: number; holdId?: string | null; key: string; memo?: string } & Ref,
): Promise<boolean> {
  const r = await c.query(
    `INSERT INTO ledger_events (account_id, kind, amount, hold_id, idempotency_key, ref_type, ref_id, memo)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (idempotency_key) DO NOTHING RETURNING id`,
    [e.accountId, e.kind, e.amount, e.holdId ?? null, e.key, e.refType ?? null, e.refId ?? null, e.memo ?? null],
  );
  return r.rowCount === 1;
}

export async function createAccount(db: Db, name: string, id: string = randomUUID()): Promise<string> {
  await db.query('INSERT INTO accounts (id, name) VALUES ($1, $2)', [id, name]);
  return id;
}

export async function topUp(
  db: Db,
  a: { accountId: string; amount: number; idempotencyKey: string; memo?: string } & Ref,
): Promise<{ applied: boolean }> {
  assertVnd(a.amount, 'top-up amount');
  return tx(db, (c) => topUpIn(c, a));
}

/** topUp in the caller's transaction: a received payment is credited in the commit that records it. */
export async function topUpIn(
  c: DbClient,
  a: { accountId: string; amount: number; idempotencyKey: string; memo?: string } & Ref,
): Promise<{ applied: boolean }> {
  assertVnd(a.amount, 'top-up amount');
  const acc = await c.query('SELECT 1 FROM accounts WHERE id = $1', [a.accountId]);
  if (acc.rowCount === 0) throw new LedgerError(`account ${a.accountId} not found`);
  if (!(await insertEvent(c, { ...a, kind: 'topped_up', key: a.idempotencyKey }))) return { applied: false };
  await c.query('UPDATE accounts SET balance = balance + $2 WHERE id = $1', [a.accountId, a.amount]);
  return { applied: true };
}

/**
 * Places (or, for an existing open hold, extends) a hold. Refuses with InsufficientFunds when available < amount.
 * The conditional UPDATE takes the account row lock, so concurrent holds are serialised and can never overdraw.
 */
/** A hold placed through an API key: counted in the key's money in flight, and refused past the key's budget. */
export interface KeyRef {
  apiKeyId?: string | null;
}

export async function placeHold(
  db: Db,
  h: { accountId: string; holdId: string; amount: number; idempotencyKey: string; expiresAt?: Date } & Ref & KeyRef,
): Promise<{ applied: boolean }> {
  assertVnd(h.amount, 'hold amount', true);
  return tx(db, (c) => placeHoldIn(c, h));
}

export async function placeHoldIn(
  c: DbClient,
  h: {
    accountId: string;
    holdId: string;
    amount: number;
    idempotencyKey: string;
    expiresAt?: Date;
    budgetChecked?: boolean;
    /** The process holding a credit lease (billing/creditHolders.ts), so that its leases are recovered if it dies. */
    holderId?: string;
  } & Ref &
    KeyRef,
): Promise<{ applied: boolean }> {
  if (!(await insertEvent(c, { ...h, kind: 'hold_placed', key: h.idempotencyKey }))) return { applied: false };
  if (h.apiKeyId && !h.budgetChecked) {
    // The account row lock, so the key's spend and holds cannot move under the check (charges and releases take
    // it first). NO KEY UPDATE: the event insert above holds a KEY SHARE lock on the row (its foreign key), which
    // FOR UPDATE would conflict with, deadlocking two concurrent holds.
    await c.query('SELECT 1 FROM accounts WHERE id = $1 FOR NO KEY UPDATE', [h.accountId]);
    const b = await keyBudgetRoom(c, h.apiKeyId);
    if (b && b.room < h.amount) throw new BudgetExceeded(h.amount, b.room, b.period);
  }
  const upd = await c.query(
    'UPDATE accounts SET held = held + $2 WHERE id = $1 AND balance - held >= $2 RETURNING id',
    [h.accountId, h.amount],
  );
  if (upd.rowCount === 0) {
    const b = await c.query('SELECT balance - held AS available FROM accounts WHERE id = $1', [h.accountId]);
    if (b.rowCount === 0) throw new LedgerError(`account ${h.accountId} not found`);
    throw new InsufficientFunds(h.amount, b.rows[0].available);
  }
  const ins = await c.query(
    `INSERT INTO holds (id, account_id, placed, remaining, ref_type, ref_id, expires_at, api_key_id, holder_id)
     VALUES ($1, $2, $3, $3, $4, $5, $6, $7, $8)
     ON CONFLICT (id) DO UPDATE SET placed = holds.placed + EXCLUDED.placed,
       remaining = holds.remaining + EXCLUDED.remaining,
       expires_at = COALESCE(EXCLUDED.expires_at, holds.expires_at)
     WHERE holds.status = 'open' AND holds.account_id = EXCLUDED.account_id
       AND holds.api_key_id IS NOT DISTINCT FROM EXCLUDED.api_key_id
     RETURNING id`,
    [
      h.holdId,
      h.accountId,
      h.amount,
      h.refType ?? null,
      h.refId ?? null,
      h.expiresAt ?? null,
      h.apiKeyId ?? null,
      h.holderId ?? null,
    ],
  );
  if (ins.rowCount === 0) throw new LedgerError(`hold ${h.holdId} is closed or belongs to another account`);
  return { applied: true };
}

/**
 * Grants a hold of between `min` and `want` VND, as much of `want` as available allows, in one statement.
 * Used by credit leases so a small balance can still be leased. Returns the granted amount (0 when refused).
 * Through a key with a budget, also at most what the budget leaves, and at most a quarter of that above `min`
 * (so one process's lease does not take all of a small budget that other processes also serve).
 */
export async function placeFlexibleHold(
  db: Db,
  h: {
    accountId: string;
    holdId: string;
    min: number;
    want: number;
    idempotencyKey: string;
    expiresAt?: Date;
    holderId?: string;
  } & Ref &
    KeyRef,
): Promise<number> {
  assertVnd(h.min, 'hold minimum', true);
  assertVnd(h.want, 'hold amount', true);
  return tx(db, async (c) => {
    const r = await c.query('SELECT balance - held AS available FROM accounts WHERE id = $1 FOR UPDATE', [h.accountId]);
    if (r.rowCount === 0) throw new LedgerError(`account ${h.accountId} not found`);
    const available: number = r.rows[0].available;
    if (available < h.min) throw new InsufficientFunds(h.min, available);
    let amount = Math.min(Math.max(h.min, h.want), available);
    if (h.apiKeyId) {
      const b = await keyBudgetRoom(c, h.apiKeyId);
      if (b) {
        if (b.room < h.min) throw new BudgetExceeded(h.min, b.room, b.period);
        amount = Math.min(amount, Math.max(h.min, Math.ceil(b.room / 4)));
      }
    }
    const { applied } = await placeHoldIn(c, { ...h, amount, budgetChecked: true });
    return applied ? amount : 0;
  });
}

export interface HoldCharge {
  holdId: string;
  amount: number;
  idempotencyKey: string;
  memo?: string;
  refType?: string;
  refId?: string;
}

/** Charges against holds (each amount <= the hold's remaining). Replayed keys are skipped. One transaction. */
export async function chargeHolds(db: Db, charges: HoldCharge[]): Promise<number> {
  if (charges.length === 0) return 0;
  return tx(db, (c) => chargeHoldsIn(c, charges));
}

/**
 * Lock order, everywhere in the ledger: account rows first (ascending id), then hold rows (ascending id).
 * One order means concurrent holds, charges and releases can wait on each other but never deadlock.
 */
export type LockedHolds = Map<
  string,
  {
    account_id: string;
    remaining: number;
    status: string;
    ref_type: string | null;
    ref_id: string | null;
    api_key_id: string | null;
  }
>;

export async function lockHolds(c: DbClient, holdIds: string[]): Promise<LockedHolds> {
  await c.query(
    `SELECT id FROM accounts WHERE id IN (SELECT account_id FROM holds WHERE id = ANY($1::uuid[]))
     ORDER BY id FOR UPDATE`,
    [holdIds],
  );
  const r = await c.query(
    `SELECT id, account_id, remaining, status, ref_type, ref_id, api_key_id FROM holds
     WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE`,
    [holdIds],
  );
  return new Map(r.rows.map((h) => [h.id as string, h]));
}

/**
 * Batch charge, set-based: a fixed number of statements whatever the batch size (the credit flush writes
 * hundreds of request charges at once). Events are inserted first; only the ones not seen before (new keys)
 * move the projections.
 */
export async function chargeHoldsIn(c: DbClient, charges: HoldCharge[]): Promise<number> {
  if (charges.length === 0) return 0;
  const holds = await lockHolds(c, [...new Set(charges.map((ch) => ch.holdId))]);
  return applyHoldCharges(c, holds, charges);
}

/** chargeHoldsIn's second half, for callers that already hold the locks (lockHolds) on every hold charged. */
export async function applyHoldCharges(c: DbClient, holds: LockedHolds, charges: HoldCharge[]): Promise<number> {
  if (charges.length === 0) return 0;
  for (const ch of charges) {
    assertVnd(ch.amount, 'charge amount', true);
    if (!holds.has(ch.holdId)) throw new LedgerError(`hold ${ch.holdId} not found`);
  }
  const rows = charges.map((ch) => ({
    account_id: holds.get(ch.holdId)!.account_id,
    amount: ch.amount,
    hold_id: ch.holdId,
    idempotency_key: ch.idempotencyKey,
    ref_type: ch.refType ?? null,
    ref_id: ch.refId ?? null,
    memo: ch.memo ?? null,
  }));
  // Only the events not seen before (new keys; a key repeated inside the batch is inserted once) move the
  // projections; Postgres sums them per hold, so a batch of hundreds answers with one row per hold.
  const ins = await c.query(
    `WITH ins AS (
       INSERT INTO ledger_events (account_id, kind, amount, hold_id, idempotency_key, ref_type, ref_id, memo)
       SELECT x.account_id, 'charged', x.amount, x.hold_id, x.idempotency_key, x.ref_type, x.ref_id, x.memo
       FROM json_to_recordset($1::json)
         AS x(account_id uuid, amount bigint, hold_id uuid, idempotency_key text, ref_type text, ref_id text, memo text)
       ON CONFLICT (idempotency_key) DO NOTHING RETURNING hold_id, amount)
     SELECT hold_id, sum(amount)::bigint AS amount, count(*)::int AS n FROM ins GROUP BY hold_id`,
    [JSON.stringify(rows)],
  );
  if (ins.rowCount === 0) return 0;
  const perHold = new Map<string, number>();
  const perAccount = new Map<string, number>();
  const perKey = new Map<string, number>();
  let applied = 0;
  for (const r of ins.rows as { hold_id: string; amount: number; n: number }[]) {
    perHold.set(r.hold_id, r.amount);
    applied += r.n;
  }
  for (const [holdId, amount] of perHold) {
    const h = holds.get(holdId)!;
    if (h.status !== 'open') throw new LedgerError(`hold ${holdId} is closed`);
    if (amount > h.remaining) throw new LedgerError(`charge ${amount} exceeds hold ${holdId} remaining ${h.remaining}`);
    perAccount.set(h.account_id, (perAccount.get(h.account_id) ?? 0) + amount);
    if (h.api_key_id) perKey.set(h.api_key_id, (perKey.get(h.api_key_id) ?? 0) + amount);
  }
  await c.query(
    `UPDATE holds h SET remaining = h.remaining - x.amount
     FROM (SELECT unnest($1::uuid[]) AS id, unnest($2::bigint[]) AS amount) x WHERE h.id = x.id`,
    [[...perHold.keys()], [...perHold.values()]],
  );
  await c.query(
    `UPDATE accounts a SET balance = a.balance - x.amount, held = a.held - x.amount
     FROM (SELECT unnest($1::uuid[]) AS id, unnest($2::bigint[]) AS amount) x WHERE a.id = x.id`,
    [[...perAccount.keys()], [...perAccount.values()]],
  );
  await addKeySpend(c, perKey);
  return applied;
}

/**
 * Extends locked open holds by `amount` each (a credit lease whose requests' usage came out above their
 * reservations: the account's free funds, already checked by the caller under the account lock, move into the
 * hold so that its charge can take them). Replayed keys change nothing.
 */
export async function extendLockedHolds(
  c: DbClient,
  holds: LockedHolds,
  ext: { holdId: string; amount: number; idempotencyKey: string; memo?: string }[],
): Promise<void> {
  for (const x of ext) {
    assertVnd(x.amount, 'hold extension');
    const h = holds.get(x.holdId);
    if (!h || h.status !== 'open') throw new LedgerError(`hold ${x.holdId} is not open`);
    const event = {
      accountId: h.account_id,
      kind: 'hold_placed' as const,
      amount: x.amount,
      holdId: x.holdId,
      key: x.idempotencyKey,
      refType: h.ref_type ?? undefined,
      refId: h.ref_id ?? undefined,
      memo:
        x.memo ??
        (h.ref_type === 'lease' ? 'credit lease: usage above the reservation' : 'usage above the reservation'),
    };
    if (!(await insertEvent(c, event))) continue;
    await c.query('UPDATE holds SET placed = placed + $2, remaining = remaining + $2 WHERE id = $1', [
      x.holdId,
      x.amount,
    ]);
    const upd = await c.query(
      'UPDATE accounts SET held = held + $2 WHERE id = $1 AND balance - held >= $2 RETURNING id',
      [h.account_id, x.amount],
    );
    if (upd.rowCount === 0) throw new LedgerError(`account ${h.account_id} cannot cover ${x.amount} VND`);
    h.remaining = Number(h.remaining) + x.amount;
  }
}

/**
 * Records the part of requests' bills their accounts could not cover: one `uncollected` event per request (key
 * `uncollected:<request id>`, ref 'request', or the job's ref type for a job's bill), moving neither balance nor
 * held. Replays insert nothing.
 */
export async function recordUncollected(
  c: DbClient,
  rows: { accountId: string; requestId: string; amount: number; memo: string; refType?: string }[],
): Promise<void> {
  if (rows.length === 0) return;
  for (const r of rows) assertVnd(r.amount, 'uncollected amount');
  await c.query(
    `INSERT INTO ledger_events (account_id, kind, amount, idempotency_key, ref_type, ref_id, memo)
     SELECT x.account_id, 'uncollected', x.amount, 'uncollected:' || x.request_id, x.ref_type, x.request_id, x.memo
     FROM unnest($1::uuid[], $2::bigint[], $3::text[], $4::text[], $5::text[])
       AS x(account_id, amount, request_id, memo, ref_type)
     ON CONFLICT (idempotency_key) DO NOTHING`,
    [
      rows.map((r) => r.accountId),
      rows.map((r) => r.amount),
      rows.map((r) => r.requestId),
      rows.map((r) => r.memo),
      rows.map((r) => r.refType ?? 'request'),
    ],
  );
}

/** Releases what remains of a hold and closes it. Replays (same key) and already-closed holds change nothing. */
export async function releaseHold(
  db: Db,
  r: { holdId: string; idempotencyKey: string; memo?: string },
): Promise<{ applied: boolean; released: number }> {
  return tx(db, (c) => releaseHoldIn(c, r));
}

export async function releaseHoldIn(
  c: DbClient,
  r: { holdId: string; idempotencyKey: string; memo?: string },
): Promise<{ applied: boolean; released: number }> {
  const hold = (await lockHolds(c, [r.holdId])).get(r.holdId);
  if (!hold) throw new LedgerError(`hold ${r.holdId} not found`);
  if (hold.status !== 'open') return { applied: false, released: 0 };
  if (
    !(await insertEvent(c, {
      accountId: hold.account_id,
      kind: 'hold_released',
      amount: hold.remaining,
      holdId: r.holdId,
      key: r.idempotencyKey,
      memo: r.memo,
      refType: hold.ref_type ?? undefined,
      refId: hold.ref_id ?? undefined,
    }))
  ) {
    return { applied: false, released: 0 };
  }
  await c.query(`UPDATE holds SET remaining = 0, status = 'closed', closed_at = now() WHERE id = $1`, [r.holdId]);
  await c.query('UPDATE accounts SET held = held - $2 WHERE id = $1', [hold.account_id, hold.remaining]);
  return { applied: true, released: hold.remaining };
}

/**
 * Returns `amount` of an open hold to the account and leaves the hold open (a credit lease giving back what no
 * request has reserved). A replayed key changes nothing; more than the hold's remaining is refused.
 */
export async function releaseHoldPart(
  db: Db,
  r: { holdId: string; amount: number; idempotencyKey: string; memo?: string },
): Promise<{ applied: boolean }> {
  assertVnd(r.amount, 'released amount');
  return tx(db, async (c) => {
    const hold = (await lockHolds(c, [r.holdId])).get(r.holdId);
    if (!hold) throw new LedgerError(`hold ${r.holdId} not found`);
    if (hold.status !== 'open' || hold.remaining < r.amount)
      throw new LedgerError(`hold ${r.holdId} cannot give back ${r.amount} VND`);
    const event = {
      accountId: hold.account_id,
      kind: 'hold_released' as const,
      amount: r.amount,
      holdId: r.holdId,
      key: r.idempotencyKey,
      memo: r.memo,
      refType: hold.ref_type ?? undefined,
      refId: hold.ref_id ?? undefined,
    };
    if (!(await insertEvent(c, event))) return { applied: false };
    await c.query('UPDATE holds SET remaining = remaining - $2 WHERE id = $1', [r.holdId, r.amount]);
    await c.query('UPDATE accounts SET held = held - $2 WHERE id = $1', [hold.account_id, r.amount]);
    return { applied: true };
  });
}

/**
 * Asks the other credit leases of an account to give back what they do not use (they read lease_recall_at at
 * their next flush), when they hold at least `missing` VND: open lease holds of the account other than `ownHoldId`,
 * only the key's own when `apiKeyId` is given (a budgeted key's leases). Returns whether it asked.
 */
export async function recallLeases(
  db: Db,
  r: { accountId: string; apiKeyId: string | null; ownHoldId: string | null; missing: number },
): Promise<boolean> {
  const q = await db.query(
    `WITH others AS (
       SELECT COALESCE(sum(remaining), 0) AS v FROM holds
        WHERE account_id = $1 AND status = 'open' AND ref_type = 'lease' AND id IS DISTINCT FROM $3::uuid
          AND ($2::uuid IS NULL OR api_key_id = $2::uuid))
     UPDATE accounts SET lease_recall_at = clock_timestamp()
      WHERE id = $1 AND (SELECT v FROM others) >= $4 RETURNING id`,
    [r.accountId, r.apiKeyId, r.ownHoldId, r.missing],
  );
  return q.rowCount === 1;
}

/** The accounts among `accountIds` whose leases were recalled within the last `withinMs`, with when. */
export async function leaseRecalls(db: Db, accountIds: string[], withinMs: number): Promise<Map<string, number>> {
  const q = await db.query(
    `SELECT id, lease_recall_at FROM accounts
      WHERE id = ANY($1::uuid[]) AND lease_recall_at > clock_timestamp() - $2::int * interval '1 millisecond'`,
    [accountIds, withinMs],
  );
  return new Map(q.rows.map((x) => [x.id as string, (x.lease_recall_at as Date).getTime()]));
}

/**
 * Settles a hold: charges `charge` (capped at what the hold covers) and releases the rest, atomically.
 * Idempotent by `idempotencyKey` (the charge uses `<key>:charge`, the release `<key>:release`).
 */
export async function settleHold(
  db: Db,
  s: { holdId: string; charge: number; idempotencyKey: string; memo?: string } & Ref,
): Promise<{ charged: number; released: number }> {
  return tx(db, (c) => settleHoldIn(c, s));
}

/** settleHold inside the caller's transaction (a video job settles and changes status in one commit). */
export async function settleHoldIn(
  c: DbClient,
  s: { holdId: string; charge: number; idempotencyKey: string; memo?: string } & Ref,
): Promise<{ charged: number; released: number }> {
  assertVnd(s.charge, 'charge', true);
  const h = (await lockHolds(c, [s.holdId])).get(s.holdId);
  if (!h) throw new LedgerError(`hold ${s.holdId} not found`);
  let charged = 0;
  if (h.status === 'open') {
    const amount = Math.min(s.charge, h.remaining);
    if (amount > 0) {
      charged = (await chargeHoldsIn(c, [
        {
          holdId: s.holdId,
          amount,
          idempotencyKey: `${s.idempotencyKey}:charge`,
          memo: s.memo,
          refType: s.refType,
          refId: s.refId,
        },
      ]))
        ? amount
        : 0;
    }
  }
  const { released } = await releaseHoldIn(c, {
    holdId: s.holdId,
    idempotencyKey: `${s.idempotencyKey}:release`,
    memo: s.memo,
  });
  return { charged, released };
}

export async function getBalance(db: Db | DbClient, accountId: string): Promise<Balance | null> {
  const r = await db.query('SELECT balance, held FROM accounts WHERE id = $1', [accountId]);
  if (r.rowCount === 0) return null;
  const { balance, held } = r.rows[0];
  return { balance, held, available: balance - held };
}

export async function listLedger(db: Db, accountId: string, limit = 50, beforeId?: number): Promise<LedgerEntry[]> {
  const r = await db.query(
    `SELECT id, kind, amount, hold_id, ref_type, ref_id, memo, created_at FROM ledger_events
     WHERE account_id = $1 AND ($3::bigint IS NULL OR id < $3) ORDER BY id DESC LIMIT $2`,
    [accountId, limit, beforeId ?? null],
  );
  return r.rows.map((x) => ({
    id: Number(x.id),
    kind: x.kind,
    amount: x.amount,
    holdId: x.hold_id,
    refType: x.ref_type,
    refId: x.ref_id,
    memo: x.memo,
    createdAt: (x.created_at as Date).toISOString(),
  }));
}

/** Releases open holds past their expiry (e.g. a credit lease of a crashed API process). */
export async function releaseExpiredHolds(db: Db, graceMs = 60_000): Promise<number> {
  const r = await db.query(
    `SELECT id FROM holds
     WHERE status = 'open' AND expires_at IS NOT NULL AND expires_at < now() - ($1::int * interval '1 millisecond')
     LIMIT 500`,
    [graceMs],
  );
  let n = 0;
  for (const row of r.rows) {
    const out = await releaseHold(db, { holdId: row.id, idempotencyKey: `expire:${row.id}`, memo: 'hold expired' });
    if (out.applied) n++;
  }
  return n;
}

export interface ProjectionMismatch {
  accountId: string;
  balance: number;
  held: number;
  rebuiltBalance: number;
  rebuiltHeld: number;
}

/**
 * Rebuilds every account's balance and held from the events and returns the accounts whose projection differs,
 * the holds whose remaining differs (`hold:<id>`), and the request charges whose usage records do not add up to
 * them (`charge:<key>`, balance = charged, rebuiltBalance = sum of the usage costs), and the per-key budget spend
 * that differs from the charges against the key's holds (`key-spend:<keyId>:<period>`).
 */
export async function verifyProjections(db: Db | DbClient): Promise<ProjectionMismatch[]> {
  const r = await db.query(`
    WITH rebuilt AS (
      SELECT account_id,
        COALESCE(SUM(CASE kind WHEN 'topped_up' THEN amount WHEN 'charged' THEN -amount ELSE 0 END), 0) AS balance,
        COALESCE(SUM(CASE WHEN kind = 'hold_placed' THEN amount
                          WHEN kind = 'hold_released' THEN -amount
                          WHEN kind = 'charged' AND hold_id IS NOT NULL THEN -amount ELSE 0 END), 0) AS held
      FROM ledger_events GROUP BY account_id)
    SELECT a.id, a.balance, a.held, COALESCE(r.balance, 0)::bigint AS rb, COALESCE(r.held, 0)::bigint AS rh
    FROM accounts a LEFT JOIN rebuilt r ON r.account_id = a.id
    WHERE a.balance <> COALESCE(r.balance, 0) OR a.held <> COALESCE(r.held, 0)`);
  const holds = await db.query(`
    SELECT h.id FROM holds h LEFT JOIN (
      SELECT hold_id, SUM(CASE kind WHEN 'hold_placed' THEN amount ELSE -amount END) AS rem
      FROM ledger_events WHERE hold_id IS NOT NULL GROUP BY hold_id) e ON e.hold_id = h.id
    WHERE h.remaining <> COALESCE(e.rem, 0)`);
  // Request charges are itemised by usage records (usage_records.charge_key): each such event's amount must be
  // the sum of the usage costs naming it, and every key named must be a charge.
  const charges = await db.query(`
    WITH u AS (SELECT charge_key, sum(cost_vnd) AS vnd FROM usage_records
               WHERE charge_key IS NOT NULL GROUP BY charge_key),
         e AS (SELECT idempotency_key, amount FROM ledger_events
               WHERE kind = 'charged' AND (ref_type = 'usage_batch' OR idempotency_key IN (SELECT charge_key FROM u)))
    SELECT COALESCE(u.charge_key, e.idempotency_key) AS key, COALESCE(u.vnd, 0)::bigint AS usage_vnd,
           COALESCE(e.amount, 0)::bigint AS charged
    FROM u FULL JOIN e ON e.idempotency_key = u.charge_key
    WHERE u.vnd IS DISTINCT FROM e.amount`);
  // Each key's spend per budget period: the charges against holds naming the key, plus the usage records of the
  // key charged to a lease naming no key (an account's shared lease), by the period their event falls in (the
  // same now() the charge's transaction wrote them all with).
  const spend = await db.query(
    `
    WITH charged AS (
      SELECT h.api_key_id, e.created_at, e.amount
      FROM ledger_events e JOIN holds h ON h.id = e.hold_id
      WHERE e.kind = 'charged' AND h.api_key_id IS NOT NULL
      UNION ALL
      SELECT u.api_key_id, e.created_at, u.cost_vnd
      FROM usage_records u JOIN ledger_events e ON e.idempotency_key = u.charge_key JOIN holds h ON h.id = e.hold_id
      WHERE u.api_key_id IS NOT NULL AND u.cost_vnd > 0 AND h.api_key_id IS NULL),
    rebuilt AS (
      SELECT c.api_key_id, p.period, sum(c.amount)::bigint AS v
      FROM charged c
      CROSS JOIN LATERAL (VALUES ('day:' || to_char(c.created_at AT TIME ZONE $1, 'YYYY-MM-DD')),
                                 ('month:' || to_char(c.created_at AT TIME ZONE $1, 'YYYY-MM'))) AS p(period)
      GROUP BY 1, 2)
    SELECT COALESCE(r.api_key_id, s.api_key_id) AS key_id, COALESCE(r.period, s.period) AS period,
           COALESCE(r.v, 0)::bigint AS rebuilt, COALESCE(s.spent_vnd, 0)::bigint AS spent
    FROM rebuilt r FULL JOIN api_key_spend s ON s.api_key_id = r.api_key_id AND s.period = r.period
    WHERE COALESCE(r.v, 0) <> COALESCE(s.spent_vnd, 0)`,
    [budgetTimeZone()],
  );
  const out: ProjectionMismatch[] = r.rows.map((x) => ({
    accountId: x.id,
    balance: x.balance,
    held: x.held,
    rebuiltBalance: x.rb,
    rebuiltHeld: x.rh,
  }));
  for (const h of holds.rows)
    out.push({ accountId: `hold:${h.id}`, balance: 0, held: 0, rebuiltBalance: 0, rebuiltHeld: 0 });
  for (const k of spend.rows)
    out.push({
      accountId: `key-spend:${k.key_id}:${k.period}`,
      balance: k.spent,
      held: 0,
      rebuiltBalance: k.rebuilt,
      rebuiltHeld: 0,
    });
  for (const c of charges.rows)
    out.push({
      accountId: `charge:${c.key}`,
      balance: c.charged,
      held: 0,
      rebuiltBalance: c.usage_vnd,
      rebuiltHeld: 0,
    });
  return out;
}
