import type { Catalog } from '../../catalog';
import type { Db } from '../../db';
import { dayOf, isReconciled, NOT_RECONCILED } from './reconcile';

const DAY_MS = 86_400_000;

/** How far back a run retries the days not yet reconciled, and `reconcile-status` looks (RECONCILE_LOOKBACK_DAYS). */
export function lookbackDaysOf(env: NodeJS.ProcessEnv = process.env): number {
  const n = Number(env.RECONCILE_LOOKBACK_DAYS ?? 7);
  return Number.isSafeInteger(n) && n >= 0 && n <= 92 ? n : 7;
}

/** The `n` UTC days before `day` (YYYY-MM-DD), oldest first. */
export function daysBefore(day: string, n: number): string[] {
  const start = Date.parse(`${day}T00:00:00Z`);
  return Array.from({ length: n }, (_, i) => dayOf(new Date(start - (n - i) * DAY_MS)));
}

/** The days among `days` provider `provider` has no reconciliation of (a run failed, was skipped or never ran). */
export async function unreconciledDays(db: Db, provider: string, days: string[]): Promise<string[]> {
  if (days.length === 0) return [];
  const r = await db.query(
    `SELECT to_char(day, 'YYYY-MM-DD') AS day FROM reconciliation_runs WHERE provider = $1 AND day = ANY($2::date[])`,
    [provider, days],
  );
  const done = new Set(r.rows.map((x) => x.day as string));
  return days.filter((d) => !done.has(d));
}

export type DayStatus = 'reconciled' | 'reconciled_empty' | 'not_reconciled';

export interface ProviderStatus {
  id: string;
  kind: string;
  /** Its bill is read (false: the report it would be read from, `report`). */
  reconciled: boolean;
  report: string | null;
  /** Each of the days asked, newest first: reconciled (with rows), reconciled with no usage, or not reconciled. */
  days: { day: string; status: DayStatus; rows: number; reconciled_at: string | null }[];
  /** The days not reconciled yet, newest first. */
  missing: string[];
}

/**
 * Every catalog provider's reconciliation over the `days` UTC days before `today` (today is not over: not listed).
 * A day reconciled without usage reads `reconciled_empty`; a day with no run `not_reconciled`.
 */
export async function reconcileStatus(
  db: Db,
  catalog: Catalog,
  opts: { days: number; today?: string },
): Promise<ProviderStatus[]> {
  const days = daysBefore(opts.today ?? dayOf(new Date()), opts.days).reverse();
  const r = await db.query(
    `SELECT provider, to_char(day, 'YYYY-MM-DD') AS day, rows, reconciled_at FROM reconciliation_runs
     WHERE day = ANY($1::date[])`,
    [days],
  );
  const runs = new Map(r.rows.map((x) => [`${x.provider}\t${x.day}`, x] as const));
  return [...catalog.providers.values()].map((p) => {
    const reconciled = isReconciled(p);
    const list = reconciled
      ? days.map((day) => {
          const run = runs.get(`${p.id}\t${day}`);
          return {
            day,
            status: (!run ? 'not_reconciled' : run.rows > 0 ? 'reconciled' : 'reconciled_empty') as DayStatus,
            rows: run?.rows ?? 0,
            reconciled_at: run ? (run.reconciled_at as Date).toISOString() : null,
          };
        })
      : [];
    return {
      id: p.id,
      kind: p.kind,
      reconciled,
      report: reconciled ? null : (NOT_RECONCILED[p.kind] ?? null),
      days: list,
      missing: list.filter((d) => d.status === 'not_reconciled').map((d) => d.day),
    };
  });
}
