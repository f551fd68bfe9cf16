import type { DbClient } from '../db';

/**
 * Per-key spend budgets (VND per calendar day and/or month), enforced by the ledger itself: a key's spend in the
 * period (api_key_spend, moved in the transaction that writes the charge) plus the remaining of its open holds
 * (video jobs, the credit leases of budgeted keys) may never exceed its budget. Every hold placed through a key
 * is checked here under the account row lock, which every charge and release also takes first, so the check is
 * exact across any number of API processes and workers: no Redis, no cache.
 */

export const DEFAULT_BUDGET_TIME_ZONE = 'Asia/Ho_Chi_Minh';
let timeZone = DEFAULT_BUDGET_TIME_ZONE;

/** Refused when Intl does not know the zone: a typo must fail at start-up, not move every period silently. */
export function checkTimeZone(tz: string): string {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
  } catch {
    throw new Error(`BUDGET_TIME_ZONE: unknown time zone ${JSON.stringify(tz)}`);
  }
  return tz;
}

/** Set once at start-up from BUDGET_TIME_ZONE (config.ts); every process of a deployment must use the same zone. */
export function setBudgetTimeZone(tz: string): void {
  timeZone = checkTimeZone(tz);
}
export function budgetTimeZone(): string {
  return timeZone;
}

/** Thrown (and the transaction rolled back) when a hold would take a key past its budget. */
export class BudgetExceeded extends Error {
  constructor(
    public readonly needed: number,
    public readonly room: number,
    public readonly period: 'day' | 'month',
  ) {
    super(`key budget exceeded: ${needed} VND needed, ${room} VND left this ${period}`);
  }
}

// The periods in the budget zone ($tz is a parameter), computed by Postgres: by the ledger from its transaction
// time (`at` now()), so every row a transaction writes falls in one period whatever the process clocks say.
const DAY = (tz: string, at = 'now()') => `'day:' || to_char(${at} AT TIME ZONE ${tz}, 'YYYY-MM-DD')`;
const MONTH = (tz: string, at = 'now()') => `'month:' || to_char(${at} AT TIME ZONE ${tz}, 'YYYY-MM')`;

/** The budget day and month (`day:YYYY-MM-DD`, `month:YYYY-MM`) an instant falls in, by the ledger's own rule. */
export async function budgetPeriodsAt(db: Pick<DbClient, 'query'>, at: Date): Promise<{ day: string; month: string }> {
  const r = await db.query(
    `SELECT ${DAY('$2', '$1::timestamptz')} AS day, ${MONTH('$2', '$1::timestamptz')} AS month`,
    [at.toISOString(), timeZone],
  );
  return r.rows[0];
}

/**
 * What the key may still place in holds: the smaller of its day and month budgets minus spend in the period, its
 * open holds, and the open shared credit leases of its account created before the account's budget fence (they
 * may still carry requests of the key served before a process saw its budget: see migration 074). Null when the
 * key has no budget. Call with the account row locked (FOR UPDATE).
 */
export async function keyBudgetRoom(
  c: DbClient,
  keyId: string,
): Promise<{ room: number; period: 'day' | 'month' } | null> {
  const r = await c.query(
    `WITH k AS (
       SELECT k.id, k.account_id, k.project_id, a.budget_fence_at,
              COALESCE(k.budget_day_vnd, a.default_budget_day_vnd) AS day_budget,
              COALESCE(k.budget_month_vnd, a.default_budget_month_vnd) AS month_budget,
              pj.spend_limit_vnd AS project_limit, a.spend_limit_vnd AS org_limit
       FROM api_keys k JOIN accounts a ON a.id = k.account_id JOIN projects pj ON pj.id = k.project_id
       WHERE k.id = $1),
     fenced AS (
       SELECT COALESCE(sum(h.remaining), 0) AS v FROM holds h, k
       WHERE h.account_id = k.account_id AND h.status = 'open' AND h.api_key_id IS NULL AND h.ref_type = 'lease'
         AND h.created_at < k.budget_fence_at),
     held AS (
       SELECT (SELECT COALESCE(sum(remaining), 0) FROM holds WHERE api_key_id = $1 AND status = 'open')
            + (SELECT CASE WHEN k.day_budget IS NOT NULL OR k.month_budget IS NOT NULL THEN fenced.v ELSE 0 END
               FROM k, fenced) AS v),
     -- A project's and an organization's month (migration 214): the spend and open holds of all their keys, and
     -- the shared leases created before the budget fence (they may carry any key's requests).
     scoped AS (
       SELECT
         (SELECT COALESCE(sum(s.spent_vnd), 0) FROM api_key_spend s JOIN api_keys x ON x.id = s.api_key_id, k
          WHERE x.project_id = k.project_id AND s.period = ${MONTH('$2')})
         + (SELECT COALESCE(sum(h.remaining), 0) FROM holds h JOIN api_keys x ON x.id = h.api_key_id, k
            WHERE x.project_id = k.project_id AND h.status = 'open') AS project_used,
         (SELECT COALESCE(sum(s.spent_vnd), 0) FROM api_key_spend s JOIN api_keys x ON x.id = s.api_key_id, k
          WHERE x.account_id = k.account_id AND s.period = ${MONTH('$2')})
         + (SELECT COALESCE(sum(h.remaining), 0) FROM holds h, k
            WHERE h.account_id = k.account_id AND h.status = 'open' AND h.api_key_id IS NOT NULL) AS org_used
       FROM k WHERE k.project_limit IS NOT NULL OR k.org_limit IS NOT NULL)
     SELECT k.day_budget - held.v
              - COALESCE((SELECT spent_vnd FROM api_key_spend WHERE api_key_id = $1 AND period = ${DAY('$2')}), 0)
              AS day_room,
            k.month_budget - held.v
              - COALESCE((SELECT spent_vnd FROM api_key_spend WHERE api_key_id = $1 AND period = ${MONTH('$2')}), 0)
              AS month_room,
            k.project_limit - scoped.project_used - fenced.v AS project_room,
            k.org_limit - scoped.org_used - fenced.v AS org_room
     FROM k CROSS JOIN held CROSS JOIN fenced LEFT JOIN scoped ON true`,
    [keyId, timeZone],
  );
  if (r.rowCount === 0) return null;
  const num = (v: unknown) => (v === null ? null : Number(v));
  const day = num(r.rows[0].day_room);
  const months = [r.rows[0].month_room, r.rows[0].project_room, r.rows[0].org_room].map(num).filter((v) => v !== null);
  const month = months.length ? Math.min(...(months as number[])) : null;
  if (day === null && month === null) return null;
  if (month === null || (day !== null && day <= month)) return { room: Math.max(0, day!), period: 'day' };
  return { room: Math.max(0, month), period: 'month' };
}

/** Adds charged VND to each key's day and month spend (in the transaction that writes the charge events). */
export async function addKeySpend(c: DbClient, perKey: Map<string, number>): Promise<void> {
  if (perKey.size === 0) return;
  await c.query(
    `INSERT INTO api_key_spend (api_key_id, period, spent_vnd)
     SELECT x.id, p.period, x.amount
     FROM unnest($1::uuid[], $2::bigint[]) AS x(id, amount)
     CROSS JOIN (VALUES (${DAY('$3')}), (${MONTH('$3')})) AS p(period)
     ORDER BY 1, 2
     ON CONFLICT (api_key_id, period) DO UPDATE SET spent_vnd = api_key_spend.spent_vnd + EXCLUDED.spent_vnd`,
    [[...perKey.keys()], [...perKey.values()], timeZone],
  );
}

export interface KeySpend {
  day: number;
  month: number;
}

/** Each key's spend in the current day and month (console, CLI). */
export async function keySpend(db: Pick<DbClient, 'query'>, keyIds: string[]): Promise<Map<string, KeySpend>> {
  const out = new Map<string, KeySpend>(keyIds.map((k) => [k, { day: 0, month: 0 }]));
  if (keyIds.length === 0) return out;
  const r = await db.query(
    `SELECT api_key_id, period = ${DAY('$2')} AS is_day, spent_vnd FROM api_key_spend
     WHERE api_key_id = ANY($1::uuid[]) AND period IN (${DAY('$2')}, ${MONTH('$2')})`,
    [keyIds, timeZone],
  );
  for (const row of r.rows) {
    const s = out.get(row.api_key_id)!;
    if (row.is_day) s.day = Number(row.spent_vnd);
    else s.month = Number(row.spent_vnd);
  }
  return out;
}
