import { randomUUID } from 'node:crypto';
import type { DbClient } from '../db';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { from as copyFrom } from 'pg-copy-streams';
import {
  applyHoldCharges,
  extendLockedHolds,
  lockHolds,
  LedgerError,
  recordUncollected,
  type HoldCharge,
  type LockedHolds,
} from './ledger';
import { addKeySpend, keyBudgetRoom } from './budget';
import type { Pricing } from '../catalog';
import { offPathSync } from '../observability';

/**
 * Writes settled synchronous requests: their usage records and, per credit-lease hold, ONE `charged` ledger event
 * for the sum of their costs (one ledger row per request was a third of the gateway's per-request CPU, in
 * Postgres). Every usage record with a cost names its event (`charge_key`), so each batch event is itemised.
 *
 * Exactly once: the usage insert is the gate. A request id already written (a flush retried after its commit was
 * not acknowledged) inserts nothing and so adds nothing to the charge, and the charge is only the sum of the rows
 * this transaction inserted. A hold with a single request keeps the per-request form (`req:<id>`, ref 'request').
 *
 * The bill is the provider's bill: a request whose cost went past what its lease covered (`excess`) has the rest
 * collected here, under the account lock, from what the account has free (balance - held) and its key's budget
 * leaves: the lease hold is extended by that much and charged with the rest. What neither covers is the request's
 * shortfall: its usage record carries it (shortfall_vnd) and an `uncollected` ledger event records it, so every
 * usage record satisfies units x its prices = cost_vnd + shortfall_vnd, and the balance never goes below 0.
 */

export interface UsageInput {
  /** Request id; the usage record's id, and the idempotency gate of its charge. */
  id: string;
  apiKeyId: string | null;
  model: string;
  operation: string;
  units: Record<string, number>;
  latencyMs: number;
  status: number;
  /** The deployment that answered (or was tried last), and `retry` / `fallback` when it was not the first try. */
  deployment?: string | null;
  routing?: string | null;
  /** The catalog prices the request is billed at; null or absent: billed nothing (a failed call). */
  pricing?: Pricing | null;
}

/**
 * A settled request: its usage, the lease hold it was reserved from, the VND its lease covers (0: nothing) and the
 * VND of its bill beyond that (`excess`), collected from the account here when it can be.
 */
export interface SettledUsage {
  readonly usage: UsageInput;
  readonly accountId: string;
  readonly holdId: string;
  readonly cost: number;
  readonly excess?: number;
  /** The ledger refused its charge (logged by the caller): record the usage without a charge, all of it a shortfall. */
  refused?: boolean;
}

/** What a written request came to: VND charged and VND left uncollected (its shortfall). */
interface Billed {
  cost: number;
  shortfall: number;
}

interface ChargeGroup {
  holdId: string;
  key: string;
  single: SettledUsage | null;
  rows: SettledUsage[];
}

/** "412 requests: chat.completions gpt-4o-mini ×400, embeddings text-embedding-3-small ×12" (first 3 kinds). */
function batchMemo(n: number, rows: SettledUsage[]): string {
  const kinds = new Map<string, number>();
  for (const r of rows) {
    const k = `${r.usage.operation} ${r.usage.model}`;
    kinds.set(k, (kinds.get(k) ?? 0) + 1);
  }
  const list = [...kinds].sort((a, b) => b[1] - a[1]);
  const shown = list
    .slice(0, 3)
    .map(([k, c]) => `${k} ×${c}`)
    .join(', ');
  return `${n} requests: ${shown}${list.length > 3 ? `, +${list.length - 3} more` : ''}`;
}

/** One COPY text-format field: backslash, tab, newline and carriage return escaped; null as \N. */
function copyField(v: string | null): string {
  if (v === null) return '\\N';
  return /[\\\t\n\r]/.test(v)
    ? v.replace(/[\\\t\n\r]/g, (ch) => (ch === '\\' ? '\\\\' : ch === '\t' ? '\\t' : ch === '\n' ? '\\n' : '\\r'))
    : v;
}

/** A catalog entry's prices as JSON, serialised once per catalog object (the same object serves every request). */
const pricingJson = new WeakMap<Pricing, string>();
function pricingText(p: Pricing | null | undefined): string | null {
  if (!p) return null;
  let j = pricingJson.get(p);
  if (j === undefined) pricingJson.set(p, (j = JSON.stringify(p)));
  return j;
}

/** The batch's usage records in COPY text format, one line each. */
function copyText(batch: SettledUsage[], keyOf: Map<SettledUsage, string>, billed: Map<SettledUsage, Billed>): string {
  let out = '';
  for (const s of batch) {
    const u = s.usage;
    const b = billed.get(s)!;
    out +=
      `${u.id}\t${s.accountId}\t${u.apiKeyId ?? '\\N'}\t${copyField(u.model)}\t${copyField(u.operation)}\t` +
      `${copyField(JSON.stringify(u.units))}\t${b.cost}\t${b.shortfall}\t${copyField(pricingText(u.pricing))}\t` +
      `${Math.round(u.latencyMs)}\t${u.status}\t${copyField(keyOf.get(s) ?? null)}\t` +
      `${copyField(u.deployment ?? null)}\t${copyField(u.routing ?? null)}\n`;
  }
  return out;
}

/** Rows per piece of COPY text: about a tenth of a millisecond of this process's time. */
const COPY_SLICE = 32;

/**
 * The batch's COPY text in pieces of COPY_SLICE rows, the event loop free between them: written in one piece, a
 * flush of a few hundred rows held every request in this process for about a millisecond, and the requests that
 * met it were a sixth of the c=1 tail (docs/benchmarks.md, "Where the c=1 tail comes from").
 */
async function* copyChunks(
  batch: SettledUsage[],
  keyOf: Map<SettledUsage, string>,
  billed: Map<SettledUsage, Billed>,
): AsyncGenerator<string> {
  for (let i = 0; i < batch.length; i += COPY_SLICE) {
    if (i > 0) await new Promise<void>((r) => setImmediate(r));
    const slice = batch.slice(i, i + COPY_SLICE);
    yield offPathSync('credit flush: usage rows as COPY text', () => copyText(slice, keyOf, billed));
  }
}

const COPY_USAGE =
  'COPY usage_records (id, account_id, api_key_id, model, operation, units, cost_vnd, shortfall_vnd, pricing, ' +
  'latency_ms, status, charge_key, deployment, routing) FROM STDIN';

export interface WriteOptions {
  /**
   * Write the usage records with COPY (half of Postgres's CPU per row of INSERT ... SELECT FROM json). COPY has no
   * ON CONFLICT: a request already written fails the whole batch with unique_violation (23505), and the caller
   * writes the batch again without this option, where the per-row gate skips it.
   */
  copy?: boolean;
  /** Told, for each request written, what it was charged and what it left uncollected (metrics after the commit). */
  billed?: (s: SettledUsage, cost: number, shortfall: number) => void;
}

/** Within the caller's transaction. Returns the VND charged. */
export async function writeUsageBatch(c: DbClient, all: SettledUsage[], opts: WriteOptions = {}): Promise<number> {
  // The per-row path writes only the requests not written yet (a retried flush): their collection and shortfall
  // are decided once, by the transaction that wrote them.
  const batch = opts.copy ? all : await unwritten(c, all);
  if (batch.length === 0) return 0;
  const billed = new Map<SettledUsage, Billed>();
  const over: SettledUsage[] = [];
  const lockIds = new Set<string>();
  for (const s of batch) {
    const excess = s.excess ?? 0;
    if (s.refused) billed.set(s, { cost: 0, shortfall: s.cost + excess });
    else {
      billed.set(s, { cost: s.cost, shortfall: excess });
      if (excess > 0) over.push(s);
      if (s.cost > 0 || excess > 0) lockIds.add(s.holdId);
    }
  }
  // Lock order as everywhere in the ledger (accounts, then holds) before the usage rows' foreign-key checks.
  const holds = lockIds.size ? await lockHolds(c, [...lockIds]) : null;
  const extensions = holds && over.length ? await collectExcess(c, holds, over, billed) : null;
  const groups = new Map<string, ChargeGroup>();
  for (const s of batch) {
    if (billed.get(s)!.cost <= 0) continue;
    let g = groups.get(s.holdId);
    if (!g) groups.set(s.holdId, (g = { holdId: s.holdId, key: '', single: s, rows: [] }));
    else g.single = null;
    g.rows.push(s);
  }
  const keyOf = new Map<SettledUsage, string>();
  for (const g of groups.values()) {
    g.key = g.single ? `req:${g.single.usage.id}` : `usage:${randomUUID()}`;
    for (const s of g.rows) keyOf.set(s, g.key);
  }
  if (holds && extensions?.size)
    await extendLockedHolds(
      c,
      holds,
      [...extensions].map(([holdId, amount]) => ({
        holdId,
        amount,
        idempotencyKey: `${groups.get(holdId)!.key}:over`,
      })),
    );
  const charged = opts.copy
    ? await copyAndCharge(c, batch, holds, groups, keyOf, billed)
    : await insertAndCharge(c, batch, holds, groups, keyOf, billed);
  const short = batch.filter((s) => billed.get(s)!.shortfall > 0);
  if (short.length)
    await recordUncollected(
      c,
      short.map((s) => {
        const b = billed.get(s)!;
        const what = `${s.usage.operation} ${s.usage.model}`;
        const memo = `${what}: ${b.cost + b.shortfall} VND billed, ${b.shortfall} uncollected`;
        return { accountId: s.accountId, requestId: s.usage.id, amount: b.shortfall, memo };
      }),
    );
  if (opts.billed) for (const s of batch) opts.billed(s, billed.get(s)!.cost, billed.get(s)!.shortfall);
  return charged;
}

/** The requests of `batch` with no usage record yet. */
async function unwritten(c: DbClient, batch: SettledUsage[]): Promise<SettledUsage[]> {
  const r = await c.query('SELECT id FROM usage_records WHERE id = ANY($1::uuid[])', [batch.map((s) => s.usage.id)]);
  if (r.rowCount === 0) return batch;
  const done = new Set(r.rows.map((x) => x.id as string));
  return batch.filter((s) => !done.has(s.usage.id));
}

/**
 * Collects the requests' excess (their bill beyond what their lease covered) from what each account has free and,
 * for a key with a budget, what the budget leaves; updates `billed` (cost up, shortfall down by what is collected)
 * and returns, per lease hold, the VND to extend it by so that it covers the charge. The accounts are locked.
 */
async function collectExcess(
  c: DbClient,
  holds: LockedHolds,
  over: SettledUsage[],
  billed: Map<SettledUsage, Billed>,
): Promise<Map<string, number>> {
  const accounts = [...new Set(over.map((s) => s.accountId))];
  const free = new Map<string, number>(
    (await c.query('SELECT id, balance - held AS free FROM accounts WHERE id = ANY($1::uuid[])', [accounts])).rows.map(
      (r) => [r.id as string, Math.max(0, Number(r.free))],
    ),
  );
  const room = new Map<string, number | null>();
  const extend = new Map<string, number>();
  for (const s of over) {
    const h = holds.get(s.holdId);
    if (!h || h.status !== 'open') continue;
    let take = Math.min(s.excess ?? 0, free.get(h.account_id) ?? 0);
    // A budgeted key's lease names the key; a shared lease's request still counts against its key's budget.
    const keyId = h.api_key_id ?? s.usage.apiKeyId;
    if (keyId && take > 0) {
      if (!room.has(keyId)) room.set(keyId, (await keyBudgetRoom(c, keyId))?.room ?? null);
      const left = room.get(keyId);
      if (left != null) {
        take = Math.min(take, left);
        room.set(keyId, left - take);
      }
    }
    if (take <= 0) continue;
    free.set(h.account_id, free.get(h.account_id)! - take);
    extend.set(s.holdId, (extend.get(s.holdId) ?? 0) + take);
    const b = billed.get(s)!;
    b.cost += take;
    b.shortfall -= take;
  }
  return extend;
}

/** COPY the usage records (every row is written or the statement fails) and charge the groups' sums. */
async function copyAndCharge(
  c: DbClient,
  batch: SettledUsage[],
  holds: LockedHolds | null,
  groups: Map<string, ChargeGroup>,
  keyOf: Map<SettledUsage, string>,
  billed: Map<SettledUsage, Billed>,
): Promise<number> {
  await pipeline(Readable.from(copyChunks(batch, keyOf, billed)), c.query(copyFrom(COPY_USAGE)));
  if (!holds || groups.size === 0) return 0;
  const sums = [...groups.values()].map((g) => ({
    charge_key: g.key,
    amount: g.rows.reduce((t, r) => t + billed.get(r)!.cost, 0),
    n: g.rows.length,
  }));
  const charged = await chargeGroups(c, holds, groups, sums);
  await addSharedLeaseSpend(
    c,
    holds,
    [...groups.values()].flatMap((g) =>
      g.rows.map((r) => ({ hold_id: g.holdId, api_key_id: r.usage.apiKeyId, amount: billed.get(r)!.cost })),
    ),
  );
  return charged;
}

/** INSERT the usage records through the per-row gate and charge what the rows it inserted add up to. */
async function insertAndCharge(
  c: DbClient,
  batch: SettledUsage[],
  holds: LockedHolds | null,
  groups: Map<string, ChargeGroup>,
  keyOf: Map<SettledUsage, string>,
  billed: Map<SettledUsage, Billed>,
): Promise<number> {
  const ins = await c.query(
    `WITH ins AS (
       INSERT INTO usage_records (id, account_id, api_key_id, model, operation, units, cost_vnd, shortfall_vnd, pricing,
                                  latency_ms, status, charge_key, deployment, routing)
       SELECT u.id, u.account_id, u.api_key_id, u.model, u.operation, u.units, u.cost_vnd, u.shortfall_vnd, u.pricing,
              u.latency_ms, u.status, u.charge_key, u.deployment, u.routing
       FROM json_to_recordset($1::json) AS u(id uuid, account_id uuid, api_key_id uuid, model text, operation text,
            units jsonb, cost_vnd bigint, shortfall_vnd bigint, pricing jsonb, latency_ms int, status int,
            charge_key text, deployment text, routing text)
       ON CONFLICT (id) DO NOTHING
       RETURNING charge_key, api_key_id, cost_vnd)
     SELECT charge_key, api_key_id, sum(cost_vnd)::bigint AS amount, count(*)::int AS n
     FROM ins WHERE charge_key IS NOT NULL GROUP BY charge_key, api_key_id`,
    [
      JSON.stringify(
        batch.map((s) => {
          const u = s.usage;
          const b = billed.get(s)!;
          return {
            id: u.id,
            account_id: s.accountId,
            api_key_id: u.apiKeyId,
            model: u.model,
            operation: u.operation,
            units: u.units,
            cost_vnd: b.cost,
            shortfall_vnd: b.shortfall,
            pricing: u.pricing ?? null,
            latency_ms: Math.round(u.latencyMs),
            status: u.status,
            charge_key: keyOf.get(s) ?? null,
            deployment: u.deployment ?? null,
            routing: u.routing ?? null,
          };
        }),
      ),
    ],
  );
  if (!holds || ins.rowCount === 0) return 0;
  const rows = ins.rows as { charge_key: string; api_key_id: string | null; amount: number; n: number }[];
  const perCharge = new Map<string, { charge_key: string; amount: number; n: number }>();
  for (const r of rows) {
    const t = perCharge.get(r.charge_key);
    if (t) {
      t.amount += r.amount;
      t.n += r.n;
    } else perCharge.set(r.charge_key, { charge_key: r.charge_key, amount: r.amount, n: r.n });
  }
  const charged = await chargeGroups(c, holds, groups, [...perCharge.values()]);
  const holdOfKey = new Map([...groups.values()].map((g) => [g.key, g.holdId]));
  await addSharedLeaseSpend(
    c,
    holds,
    rows.map((r) => ({ hold_id: holdOfKey.get(r.charge_key)!, api_key_id: r.api_key_id, amount: r.amount })),
  );
  return charged;
}

/**
 * Per-key spend of the requests charged to a lease shared by the account's keys (a hold naming no key): each key's
 * budget period counts everything spent through it, whichever lease paid. (Leases of budgeted keys name the key,
 * and applyHoldCharges counts those.)
 */
async function addSharedLeaseSpend(
  c: DbClient,
  holds: LockedHolds,
  rows: { hold_id: string; api_key_id: string | null; amount: number }[],
): Promise<void> {
  const perKey = new Map<string, number>();
  for (const r of rows) {
    if (!r.api_key_id || r.amount <= 0 || holds.get(r.hold_id)?.api_key_id) continue;
    perKey.set(r.api_key_id, (perKey.get(r.api_key_id) ?? 0) + r.amount);
  }
  await addKeySpend(c, perKey);
}

/** One `charged` event per charge key written, for the VND of the usage records that name it. */
async function chargeGroups(
  c: DbClient,
  holds: LockedHolds,
  groups: Map<string, ChargeGroup>,
  written: { charge_key: string; amount: number; n: number }[],
): Promise<number> {
  const byKey = new Map([...groups.values()].map((g) => [g.key, g]));
  const charges: HoldCharge[] = [];
  let charged = 0;
  for (const r of written) {
    const g = byKey.get(r.charge_key);
    if (!g) throw new LedgerError(`usage batch returned an unknown charge key ${r.charge_key}`);
    charged += r.amount;
    charges.push(
      g.single
        ? {
            holdId: g.holdId,
            amount: r.amount,
            idempotencyKey: g.key,
            refType: 'request',
            refId: g.single.usage.id,
            memo: `${g.single.usage.operation} ${g.single.usage.model}`,
          }
        : {
            holdId: g.holdId,
            amount: r.amount,
            idempotencyKey: g.key,
            refType: 'usage_batch',
            refId: g.key.slice('usage:'.length),
            memo: batchMemo(r.n, g.rows),
          },
    );
  }
  await applyHoldCharges(c, holds, charges);
  return charged;
}
