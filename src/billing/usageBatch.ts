import { randomUUID } from 'node:crypto';
import type { DbClient } from '../db/pool';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { from as copyFrom } from 'pg-copy-streams';
import { applyHoldCharges, lockHolds, LedgerError, type HoldCharge, type LockedHolds } from './ledger';
import { addKeySpend } from './budget';

/**
 * Writes settled synchronous requests: their usage records and, per credit-lease hold, ONE `charged` ledger event
 * for the sum of their costs (one ledger row per request was a third of the gateway's per-request CPU, in
 * Postgres). Every usage record with a cost names its event (`charge_key`), so each batch event is itemised.
 *
 * Exactly once: the usage insert is the gate. A request id already written (a flush retried after its commit was
 * not acknowledged) inserts nothing and so adds nothing to the charge, and the charge is only the sum of the rows
 * this transaction inserted. A hold with a single request keeps the per-request form (`req:<id>`, ref 'request').
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
}

/** A settled request: its usage, the lease hold it was reserved from, and the VND to charge (0: nothing). */
export interface SettledUsage {
  readonly usage: UsageInput;
  readonly accountId: string;
  readonly holdId: string;
  readonly cost: number;
  /** The ledger refused its charge (logged by the caller): record the usage without a charge. */
  refused?: boolean;
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

/** The batch's usage records in COPY text format, one line each. */
function copyText(batch: SettledUsage[], keyOf: Map<SettledUsage, string>): string {
  let out = '';
  for (const s of batch) {
    const u = s.usage;
    out += `${u.id}\t${s.accountId}\t${u.apiKeyId ?? '\\N'}\t${copyField(u.model)}\t${copyField(u.operation)}\t${copyField(JSON.stringify(u.units))}\t${s.cost}\t${Math.round(u.latencyMs)}\t${u.status}\t${copyField(keyOf.get(s) ?? null)}\t${copyField(u.deployment ?? null)}\t${copyField(u.routing ?? null)}\n`;
  }
  return out;
}

const COPY_USAGE =
  'COPY usage_records (id, account_id, api_key_id, model, operation, units, cost_vnd, latency_ms, status, charge_key, deployment, routing) FROM STDIN';

export interface WriteOptions {
  /**
   * Write the usage records with COPY (half of Postgres's CPU per row of INSERT ... SELECT FROM json). COPY has no
   * ON CONFLICT: a request already written fails the whole batch with unique_violation (23505), and the caller
   * writes the batch again without this option, where the per-row gate skips it.
   */
  copy?: boolean;
}

/** Within the caller's transaction. Returns the VND charged. */
export async function writeUsageBatch(c: DbClient, batch: SettledUsage[], opts: WriteOptions = {}): Promise<number> {
  if (batch.length === 0) return 0;
  const groups = new Map<string, ChargeGroup>();
  for (const s of batch) {
    if (s.cost <= 0 || s.refused) continue;
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
  // Lock order as everywhere in the ledger (accounts, then holds) before the usage rows' foreign-key checks.
  const holds = groups.size ? await lockHolds(c, [...groups.keys()]) : null;
  if (opts.copy) {
    // Every row is written or the statement fails: the charges are the groups' sums.
    await pipeline(Readable.from([copyText(batch, keyOf)]), c.query(copyFrom(COPY_USAGE)));
    if (!holds) return 0;
    const sums = [...groups.values()].map((g) => ({
      charge_key: g.key,
      amount: g.rows.reduce((t, r) => t + r.cost, 0),
      n: g.rows.length,
    }));
    const charged = await chargeGroups(c, holds, groups, sums);
    await addSharedLeaseSpend(
      c,
      holds,
      [...groups.values()].flatMap((g) =>
        g.rows.map((r) => ({ hold_id: g.holdId, api_key_id: r.usage.apiKeyId, amount: r.cost })),
      ),
    );
    return charged;
  }
  const ins = await c.query(
    `WITH ins AS (
       INSERT INTO usage_records (id, account_id, api_key_id, model, operation, units, cost_vnd, latency_ms, status, charge_key, deployment, routing)
       SELECT u.id, u.account_id, u.api_key_id, u.model, u.operation, u.units, u.cost_vnd, u.latency_ms, u.status, u.charge_key, u.deployment, u.routing
       FROM json_to_recordset($1::json) AS u(id uuid, account_id uuid, api_key_id uuid, model text, operation text, units jsonb, cost_vnd bigint, latency_ms int, status int, charge_key text, deployment text, routing text)
       ON CONFLICT (id) DO NOTHING
       RETURNING charge_key, api_key_id, cost_vnd)
     SELECT charge_key, api_key_id, sum(cost_vnd)::bigint AS amount, count(*)::int AS n
     FROM ins WHERE charge_key IS NOT NULL GROUP BY charge_key, api_key_id`,
    [
      JSON.stringify(
        batch.map((s) => {
          const u = s.usage;
          return {
            id: u.id,
            account_id: s.accountId,
            api_key_id: u.apiKeyId,
            model: u.model,
            operation: u.operation,
            units: u.units,
            cost_vnd: s.cost,
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
