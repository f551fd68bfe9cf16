import type { Db } from '../db';
import { getBalance, listLedger, type LedgerEntry } from '../billing';

/** Read models for the console pages. Everything comes from the same tables the API writes (no second copy). */

export interface LedgerLink {
  type: 'job' | 'request' | 'usage' | 'lease';
  id: string;
}
export type LedgerRow = LedgerEntry & { link: LedgerLink | null };

/**
 * Where a ledger event points: a video job, an API request (usage record), a flush's requests, or a credit lease
 * hold.
 */
export function ledgerLink(e: Pick<LedgerEntry, 'refType' | 'refId' | 'holdId'>): LedgerLink | null {
  if (e.refType === 'video_job' && e.refId) return { type: 'job', id: e.refId };
  if (e.refType === 'request' && e.refId) return { type: 'request', id: e.refId };
  if (e.refType === 'usage_batch' && e.refId) return { type: 'usage', id: e.refId };
  if (e.refType === 'lease' && (e.refId || e.holdId)) return { type: 'lease', id: (e.refId ?? e.holdId)! };
  return null;
}

export async function balanceWithLedger(db: Db, accountId: string, limit: number, before?: number) {
  const [bal, ledger] = await Promise.all([getBalance(db, accountId), listLedger(db, accountId, limit + 1, before)]);
  if (!bal) return null;
  const more = ledger.length > limit;
  const rows = ledger.slice(0, limit).map((e) => ({ ...e, link: ledgerLink(e) }));
  return { ...bal, total: bal.balance, ledger: rows, nextBefore: more ? rows[rows.length - 1].id : null };
}

export async function usageRecord(db: Db, accountId: string, id: string) {
  const r = await db.query(
    `SELECT u.id, u.model, u.operation, u.units, u.cost_vnd, u.shortfall_vnd, u.latency_ms, u.status, u.created_at,
            u.api_key_id, k.name AS key_name, k.prefix AS key_prefix
       FROM usage_records u LEFT JOIN api_keys k ON k.id = u.api_key_id
      WHERE u.id = $1 AND u.account_id = $2`,
    [id, accountId],
  );
  if (r.rowCount === 0) return null;
  const u = r.rows[0];
  return {
    id: u.id,
    model: u.model,
    operation: u.operation,
    units: u.units as Record<string, number>,
    costVnd: u.cost_vnd as number,
    shortfallVnd: Number(u.shortfall_vnd),
    latencyMs: u.latency_ms as number,
    status: u.status as number,
    createdAt: (u.created_at as Date).toISOString(),
    apiKey: u.api_key_id
      ? { id: u.api_key_id as string, name: (u.key_name ?? '') as string, prefix: (u.key_prefix ?? '') as string }
      : null,
  };
}

export interface UsageRow {
  day: string;
  model: string;
  requests: number;
  costVnd: number;
  units: Record<string, number>;
}

/**
 * Usage per day (in the viewer's time zone) and model for [from, to] (inclusive dates): request count, cost, and
 * each numeric unit summed (tokens, characters, seconds, images... whatever the operation recorded).
 */
export async function usageByDayAndModel(
  db: Db,
  accountId: string,
  from: string,
  to: string,
  tz: string,
): Promise<UsageRow[]> {
  const r = await db.query(
    `WITH r AS (
       SELECT to_char((created_at AT TIME ZONE $4)::date, 'YYYY-MM-DD') AS day, model, units, cost_vnd
         FROM usage_records
        WHERE account_id = $1
          AND created_at >= ($2::date)::timestamp AT TIME ZONE $4
          AND created_at < (($3::date) + 1)::timestamp AT TIME ZONE $4),
     totals AS (SELECT day, model, count(*)::int AS requests, sum(cost_vnd)::bigint AS cost FROM r GROUP BY day, model),
     units AS (
       SELECT day, model, e.key, sum((e.value)::numeric) AS n
         FROM r, jsonb_each(CASE WHEN jsonb_typeof(r.units) = 'object' THEN r.units ELSE '{}'::jsonb END) e
        WHERE jsonb_typeof(e.value) = 'number'
        GROUP BY day, model, e.key)
     SELECT t.day, t.model, t.requests, t.cost,
            COALESCE((SELECT jsonb_object_agg(u.key, u.n) FROM units u WHERE u.day = t.day AND u.model = t.model),
                     '{}'::jsonb) AS units
       FROM totals t ORDER BY t.day, t.model`,
    [accountId, from, to, tz],
  );
  return r.rows.map((x) => ({ day: x.day, model: x.model, requests: x.requests, costVnd: x.cost, units: x.units }));
}

/** Operator view: every account with its balance projection, login and key counts. */
export async function listAccounts(db: Db) {
  const r = await db.query(
    `SELECT a.id, a.name, a.balance, a.held, a.created_at,
            (SELECT count(*)::int FROM console_users u WHERE u.account_id = a.id) AS logins,
            (SELECT count(*)::int FROM api_keys k WHERE k.account_id = a.id AND k.revoked_at IS NULL) AS keys
       FROM accounts a ORDER BY a.created_at DESC LIMIT 1000`,
  );
  return r.rows.map((a) => ({
    id: a.id as string,
    name: a.name as string,
    balance: a.balance as number,
    held: a.held as number,
    available: (a.balance - a.held) as number,
    logins: a.logins as number,
    keys: a.keys as number,
    createdAt: (a.created_at as Date).toISOString(),
  }));
}

/**
 * Operator view: what an account's requests were billed but not collected (its usage records with a shortfall):
 * the total and the most recent rows.
 */
export async function accountShortfalls(db: Db, accountId: string, limit = 20) {
  const [total, rows] = await Promise.all([
    db.query(
      `SELECT COALESCE(sum(shortfall_vnd), 0)::bigint AS vnd, count(*)::int AS n FROM usage_records
        WHERE account_id = $1 AND shortfall_vnd > 0`,
      [accountId],
    ),
    db.query(
      `SELECT id, model, operation, units, cost_vnd, shortfall_vnd, created_at FROM usage_records
        WHERE account_id = $1 AND shortfall_vnd > 0 ORDER BY created_at DESC LIMIT $2`,
      [accountId, limit],
    ),
  ]);
  return {
    totalVnd: Number(total.rows[0].vnd),
    requests: total.rows[0].n as number,
    rows: rows.rows.map((u) => ({
      id: u.id as string,
      model: u.model as string,
      operation: u.operation as string,
      units: u.units as Record<string, number>,
      costVnd: Number(u.cost_vnd),
      shortfallVnd: Number(u.shortfall_vnd),
      createdAt: (u.created_at as Date).toISOString(),
    })),
  };
}

export async function getAccount(db: Db, id: string) {
  const r = await db.query('SELECT id, name, balance, held, created_at FROM accounts WHERE id = $1', [id]);
  if (r.rowCount === 0) return null;
  const a = r.rows[0];
  return {
    id: a.id as string,
    name: a.name as string,
    balance: a.balance as number,
    held: a.held as number,
    available: (a.balance - a.held) as number,
    createdAt: (a.created_at as Date).toISOString(),
  };
}
