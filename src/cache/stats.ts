import type { Db } from '../db';

/**
 * Hits, misses and VND saved per account, project and day (table cache_stats): added up in memory on the request
 * path and written every few seconds (one upsert per account, project and day), so a hit or a miss costs no
 * database write of its own. A key of no project counts under project '' (reported as null).
 */

interface Pending {
  accountId: string;
  projectId: string;
  day: string;
  hits: number;
  misses: number;
  saved: number;
}

export interface CacheStatsDay {
  day: string;
  hits: number;
  misses: number;
  saved_vnd: number;
}

export interface CacheStatsTotals {
  hits: number;
  misses: number;
  saved_vnd: number;
  days: CacheStatsDay[];
}

export interface CacheProjectStats extends CacheStatsTotals {
  /** null: the account's keys of no project (and what was counted before stats were kept per project). */
  project_id: string | null;
  name: string | null;
}

export interface CacheStatsReport extends CacheStatsTotals {
  /** The same figures per project, the busiest first. */
  projects: CacheProjectStats[];
}

export class CacheStats {
  private pending = new Map<string, Pending>();
  /** The Pending last counted into (of the map above). */
  private last: Pending | null = null;
  private flushing: Promise<void> = Promise.resolve();
  private day = '';
  private dayEnds = 0;

  constructor(private readonly db: Db) {}

  /** Today (UTC), worked out once a day rather than on every request. */
  private today(): string {
    const now = Date.now();
    if (now >= this.dayEnds) {
      this.day = new Date(now).toISOString().slice(0, 10);
      this.dayEnds = Date.parse(`${this.day}T00:00:00Z`) + 86_400_000;
    }
    return this.day;
  }

  private of(accountId: string, projectId: string | null | undefined, day = this.today()): Pending {
    const project = projectId ?? '';
    // The same account, project and day as the last request's, most often: no key to build and look up.
    const last = this.last;
    if (last && last.accountId === accountId && last.projectId === project && last.day === day) return last;
    const k = `${accountId}|${project}|${day}`;
    let p = this.pending.get(k);
    if (!p) this.pending.set(k, (p = { accountId, projectId: project, day, hits: 0, misses: 0, saved: 0 }));
    return (this.last = p);
  }

  hit(accountId: string, projectId: string | null | undefined, savedVnd: number): void {
    const p = this.of(accountId, projectId);
    p.hits++;
    p.saved += savedVnd;
  }

  miss(accountId: string, projectId: string | null | undefined): void {
    this.of(accountId, projectId).misses++;
  }

  /** Writes what was counted since the last flush (one at a time; a failed write is counted again next time). */
  flush(): Promise<void> {
    // After the last write, whether it failed or not (a failed write would otherwise stop every later one).
    return (this.flushing = this.flushing.catch(() => undefined).then(() => this.write()));
  }

  private async write(): Promise<void> {
    if (!this.pending.size) return;
    const rows = [...this.pending.values()];
    this.pending = new Map();
    this.last = null;
    try {
      await this.db.query(
        `INSERT INTO cache_stats (account_id, project_id, day, hits, misses, saved_vnd)
         SELECT * FROM unnest($1::uuid[], $2::text[], $3::date[], $4::bigint[], $5::bigint[], $6::bigint[])
         ON CONFLICT (account_id, day, project_id) DO UPDATE SET hits = cache_stats.hits + EXCLUDED.hits,
           misses = cache_stats.misses + EXCLUDED.misses, saved_vnd = cache_stats.saved_vnd + EXCLUDED.saved_vnd`,
        [
          rows.map((r) => r.accountId),
          rows.map((r) => r.projectId),
          rows.map((r) => r.day),
          rows.map((r) => r.hits),
          rows.map((r) => r.misses),
          rows.map((r) => r.saved),
        ],
      );
    } catch (e) {
      for (const r of rows) {
        const p = this.of(r.accountId, r.projectId, r.day);
        p.hits += r.hits;
        p.misses += r.misses;
        p.saved += r.saved;
      }
      throw e;
    }
  }

  /** The account's last `days` days (oldest first), their totals, and the same per project. */
  async report(accountId: string, days: number): Promise<CacheStatsReport> {
    await this.flush().catch(() => undefined);
    const r = await this.db.query<{
      day: string;
      project_id: string;
      name: string | null;
      hits: string;
      misses: string;
      saved_vnd: string;
    }>(
      `SELECT to_char(s.day, 'YYYY-MM-DD') AS day, s.project_id, p.name, s.hits, s.misses, s.saved_vnd
       FROM cache_stats s LEFT JOIN projects p ON p.id = s.project_id AND p.account_id = s.account_id
       WHERE s.account_id = $1 AND s.day > current_date - $2::int ORDER BY s.day`,
      [accountId, days],
    );
    const out: CacheStatsReport = { ...empty(), projects: [] };
    const byProject = new Map<string, CacheProjectStats>();
    for (const row of r.rows) {
      const d = { day: row.day, hits: Number(row.hits), misses: Number(row.misses), saved_vnd: Number(row.saved_vnd) };
      let proj = byProject.get(row.project_id);
      if (!proj)
        byProject.set(row.project_id, (proj = { project_id: row.project_id || null, name: row.name, ...empty() }));
      add(proj, d);
      add(out, d);
    }
    out.projects = [...byProject.values()].sort(
      (a, b) => b.hits + b.misses - (a.hits + a.misses) || String(a.project_id).localeCompare(String(b.project_id)),
    );
    return out;
  }
}

const empty = (): CacheStatsTotals => ({ hits: 0, misses: 0, saved_vnd: 0, days: [] });

/** Adds a day's figures (days come in order: the same day follows itself). */
function add(t: CacheStatsTotals, d: CacheStatsDay): void {
  t.hits += d.hits;
  t.misses += d.misses;
  t.saved_vnd += d.saved_vnd;
  const last = t.days[t.days.length - 1];
  if (last?.day === d.day) {
    last.hits += d.hits;
    last.misses += d.misses;
    last.saved_vnd += d.saved_vnd;
  } else t.days.push({ ...d });
}
