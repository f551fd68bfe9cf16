import { tx, type Db, type DbClient } from '../db';
import { badRequest } from '../errors';

/**
 * Per-key controls: requests and tokens per minute (rate limits, src/limits/rateLimiter.ts), VND budgets per
 * calendar day and month (enforced by the ledger, src/billing/budget.ts), and an expiry date. A key's own value
 * wins; a key without one uses its account's default; neither means no limit.
 */
export interface KeyLimits {
  rpm: number | null;
  tpm: number | null;
  budgetDayVnd: number | null;
  budgetMonthVnd: number | null;
}
export const NO_LIMITS: KeyLimits = Object.freeze({ rpm: null, tpm: null, budgetDayVnd: null, budgetMonthVnd: null });

/** A key's settings as stored: its own limits (null: the account default) and its expiry. */
export interface KeySettings extends KeyLimits {
  expiresAt: string | null;
}

const FIELDS: Record<keyof KeyLimits, { column: string; max: number; what: string }> = {
  rpm: { column: 'rpm_limit', max: 2_000_000_000, what: 'requests per minute' },
  tpm: { column: 'tpm_limit', max: Number.MAX_SAFE_INTEGER, what: 'tokens per minute' },
  budgetDayVnd: { column: 'budget_day_vnd', max: Number.MAX_SAFE_INTEGER, what: 'VND per day' },
  budgetMonthVnd: { column: 'budget_month_vnd', max: Number.MAX_SAFE_INTEGER, what: 'VND per month' },
};

/**
 * Validates a patch of limits (console and operator JSON bodies, CLI flags): each present field is a whole number
 * (rates at least 1, budgets at least 0) or null to clear it; `expiresAt` (keys only) an ISO date-time or null.
 * Unknown fields are refused, so a misspelt limit is never silently ignored.
 */
export function parseLimitsPatch(input: unknown, opts: { expiry: boolean }): Partial<KeySettings> {
  if (input === null || typeof input !== 'object' || Array.isArray(input))
    throw badRequest('limits must be a JSON object', null);
  const out: Partial<KeySettings> = {};
  if (Object.keys(input).length === 0)
    throw badRequest(`give at least one of ${Object.keys(FIELDS).join(', ')}${opts.expiry ? ', expiresAt' : ''}`, null);
  for (const [k, v] of Object.entries(input as Record<string, unknown>)) {
    if (k === 'expiresAt' && opts.expiry) {
      if (v === null) out.expiresAt = null;
      else if (
        typeof v === 'string' &&
        v.length <= 40 &&
        /^\d{4}-\d{2}-\d{2}/.test(v) &&
        Number.isFinite(Date.parse(v))
      )
        out.expiresAt = expiryInRange(Date.parse(v));
      else
        throw badRequest(
          'expiresAt must be an ISO 8601 date-time (e.g. 2026-12-31T23:59:59+07:00) or null',
          'expiresAt',
        );
      continue;
    }
    const f = FIELDS[k as keyof KeyLimits];
    if (!f || !Object.hasOwn(FIELDS, k))
      throw badRequest(
        `unknown limit ${JSON.stringify(k).slice(0, 60)}; ` +
          `known: ${Object.keys(FIELDS).join(', ')}${opts.expiry ? ', expiresAt' : ''}`,
        k.slice(0, 60),
      );
    const min = k === 'rpm' || k === 'tpm' ? 1 : 0;
    if (v === null) out[k as keyof KeyLimits] = null;
    else if (typeof v === 'number' && Number.isSafeInteger(v) && v >= min && v <= f.max) out[k as keyof KeyLimits] = v;
    else
      throw badRequest(
        `${k} (${f.what}) must be a whole number from ${min}${k === 'rpm' ? ` to ${f.max}` : ''}, or null for none`,
        k,
      );
  }
  return out;
}

const MIN_EXPIRY_YEAR = 1970;
const MAX_EXPIRY_YEAR = 9999;

/**
 * An expiry instant as stored, in the years 1970 to 9999 UTC: Postgres refuses year 0 and ISO's six-digit years
 * (9999-12-31T23:59:59-14:00 is already year 10000 in UTC), and no key expires before the epoch.
 */
function expiryInRange(ms: number): string {
  const year = new Date(ms).getUTCFullYear();
  if (year < MIN_EXPIRY_YEAR || year > MAX_EXPIRY_YEAR)
    throw badRequest(`expiresAt must lie in the years ${MIN_EXPIRY_YEAR} to ${MAX_EXPIRY_YEAR} (UTC)`, 'expiresAt');
  return new Date(ms).toISOString();
}
function assignments(
  patch: Partial<KeySettings>,
  firstParam: number,
  prefix: string,
): { sql: string[]; values: unknown[] } {
  const sql: string[] = [];
  const values: unknown[] = [];
  for (const k of Object.keys(FIELDS) as (keyof KeyLimits)[]) {
    if (!(k in patch)) continue;
    values.push(patch[k]);
    sql.push(`${prefix}${FIELDS[k].column} = $${firstParam + values.length - 1}`);
  }
  if ('expiresAt' in patch) {
    values.push(patch.expiresAt);
    sql.push(`expires_at = $${firstParam + values.length - 1}`);
  }
  return { sql, values };
}

/** The default KEY_CACHE_MS: a fence at least this far ahead is safe for every process using the default or less. */
export const DEFAULT_KEY_CACHE_MS = 2000;
/** Slack on top of KEY_CACHE_MS for the commit after clock_timestamp() and clock drift between processes. */
export const BUDGET_FENCE_MARGIN_MS = 250;

/** A saved change of limits; `bindsInMs`: how long until a budget change in it binds on every process (0: none). */
export interface LimitsSaved {
  bindsInMs: number;
}

/**
 * A budget change moves the account's budget fence (migration 074) to KEY_CACHE_MS (+ margin) from now, in the
 * transaction of the change: a process whose cached key settings predate the change may serve the key from the
 * account's shared lease until then, so the shared lease holds created before the fence count against the
 * account's budgeted keys (billing/budget.ts) until released.
 */
export async function moveBudgetFence(c: DbClient, accountId: string, keyCacheMs: number): Promise<LimitsSaved> {
  const ms = keyCacheMs + BUDGET_FENCE_MARGIN_MS;
  await c.query(
    `UPDATE accounts
     SET budget_fence_at = GREATEST(budget_fence_at, clock_timestamp() + $2::int * interval '1 millisecond')
     WHERE id = $1`,
    [accountId, ms],
  );
  return { bindsInMs: ms };
}

/** True when the patch sets a budget to another value than `old` holds. */
function budgetChanged(
  patch: Partial<KeyLimits>,
  old: { budget_day_vnd: string | null; budget_month_vnd: string | null },
): boolean {
  const differs = (v: number | null | undefined, o: string | null) =>
    v !== undefined && (v === null ? o !== null : o === null || Number(o) !== v);
  return differs(patch.budgetDayVnd, old.budget_day_vnd) || differs(patch.budgetMonthVnd, old.budget_month_vnd);
}

/**
 * Waits until a budget change just saved binds on every process (its fence has passed): the console, operator
 * routes and CLI answer only then, so a budget is exact from the moment its caller is told it is set.
 */
export function untilBudgetBinds(saved: LimitsSaved): Promise<void> {
  return saved.bindsInMs > 0 ? new Promise((r) => setTimeout(r, saved.bindsInMs)) : Promise.resolve();
}

/**
 * Sets a key's own limits and expiry; false when the account has no such key. Rates and expiry take effect within
 * KEY_CACHE_MS; a changed budget binds exactly after `bindsInMs` (untilBudgetBinds).
 */
export async function setKeyLimits(
  db: Db,
  accountId: string,
  keyId: string,
  patch: Partial<KeySettings>,
  keyCacheMs = DEFAULT_KEY_CACHE_MS,
): Promise<LimitsSaved | false> {
  const a = assignments(patch, 3, '');
  return tx(db, async (c) => {
    const old = await c.query(
      'SELECT budget_day_vnd, budget_month_vnd FROM api_keys WHERE id = $1 AND account_id = $2 FOR UPDATE',
      [keyId, accountId],
    );
    if (old.rowCount === 0) return false;
    if (a.sql.length === 0) return { bindsInMs: 0 };
    await c.query(`UPDATE api_keys SET ${a.sql.join(', ')} WHERE id = $1 AND account_id = $2`, [
      keyId,
      accountId,
      ...a.values,
    ]);
    return budgetChanged(patch, old.rows[0]) ? moveBudgetFence(c, accountId, keyCacheMs) : { bindsInMs: 0 };
  });
}

/** Sets the account's defaults for keys without their own values; false when no such account. */
export async function setAccountLimits(
  db: Db,
  accountId: string,
  patch: Partial<KeyLimits>,
  keyCacheMs = DEFAULT_KEY_CACHE_MS,
): Promise<LimitsSaved | false> {
  const { expiresAt: _ignored, ...limits } = patch as Partial<KeySettings>;
  const a = assignments(limits, 2, 'default_');
  return tx(db, async (c) => {
    const old = await c.query(
      `SELECT default_budget_day_vnd AS budget_day_vnd, default_budget_month_vnd AS budget_month_vnd
       FROM accounts WHERE id = $1 FOR UPDATE`,
      [accountId],
    );
    if (old.rowCount === 0) return false;
    if (a.sql.length === 0) return { bindsInMs: 0 };
    await c.query(`UPDATE accounts SET ${a.sql.join(', ')} WHERE id = $1`, [accountId, ...a.values]);
    return budgetChanged(limits, old.rows[0]) ? moveBudgetFence(c, accountId, keyCacheMs) : { bindsInMs: 0 };
  });
}

export async function getAccountLimits(db: Db, accountId: string): Promise<KeyLimits | null> {
  const r = await db.query(
    `SELECT default_rpm_limit, default_tpm_limit, default_budget_day_vnd, default_budget_month_vnd
     FROM accounts WHERE id = $1`,
    [accountId],
  );
  if (r.rowCount === 0) return null;
  const x = r.rows[0];
  return {
    rpm: x.default_rpm_limit,
    tpm: x.default_tpm_limit,
    budgetDayVnd: x.default_budget_day_vnd,
    budgetMonthVnd: x.default_budget_month_vnd,
  };
}

/** SQL select list of a key's effective limits (alias k for api_keys, a for accounts). */
export const EFFECTIVE_LIMITS_SQL = `COALESCE(k.rpm_limit, a.default_rpm_limit) AS rpm,
  COALESCE(k.tpm_limit, a.default_tpm_limit) AS tpm,
  COALESCE(k.budget_day_vnd, a.default_budget_day_vnd) AS budget_day,
  COALESCE(k.budget_month_vnd, a.default_budget_month_vnd) AS budget_month`;

export function limitsFromRow(x: {
  rpm: number | null;
  tpm: number | null;
  budget_day: number | null;
  budget_month: number | null;
}): KeyLimits {
  if (x.rpm === null && x.tpm === null && x.budget_day === null && x.budget_month === null) return NO_LIMITS;
  return { rpm: x.rpm, tpm: x.tpm, budgetDayVnd: x.budget_day, budgetMonthVnd: x.budget_month };
}

export const hasBudget = (l: KeyLimits) => l.budgetDayVnd !== null || l.budgetMonthVnd !== null;
