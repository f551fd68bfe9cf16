import type { Db } from '../db';

/**
 * Hits, misses and VND saved per account and day (table cache_stats): added up in memory on the request path and
 * written every few seconds (one upsert per account and day), so a hit costs no database write of its own.
 */

interface Pending {
  accountId: string;
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

export interface CacheStatsReport {
  hits: number;
  misses: number;
  saved_vnd: number;
  days: CacheStatsDay[];
}

export class CacheStats {
  private pending = new Map<string, Pending>();
  private flushing: Promise<void> = Promise.resolve();

  constructor(private readonly db: Db) {}

  private of(accountId: string): Pending {
    const day = new Date().toISOString().slice(0, 10);
    const k = `${accountId}|${day}`;
    let p = this.pending.get(k);
    if (!p) this.pending.set(k, (p = { accountId, day, hits: 0, misses: 0, saved: 0 }));
    return p;
  }

  hit(accountId: string, savedVnd: number): void {
    const p = this.of(accountId);
    p.hits++;
    p.saved += savedVnd;
  }

  miss(accountId: string): void {
    this.of(accountId).misses++;
  }

  /** Writes what was counted since the last flush (one at a time; a failed write is counted again next time). */
  flush(): Promise<void> {
    return (this.flushing = this.flushing.then(() => this.write()));
  }

  private async write(): Promise<void> {
    if (!this.pending.size) return;
    const rows = [...this.pending.values()];
    this.pending = new Map();
    try {
      await this.db.query(
        `INSERT INTO cache_stats (account_id, day, hits, misses, saved_vnd)
         SELECT * FROM unnest($1::uuid[], $2::date[], $3::bigint[], $4::bigint[], $5::bigint[])
         ON CONFLICT (account_id, day) DO UPDATE SET hits = cache_stats.hits + EXCLUDED.hits,
           misses = cache_stats.misses + EXCLUDED.misses, saved_vnd = cache_stats.saved_vnd + EXCLUDED.saved_vnd`,
        [
          rows.map((r) => r.accountId),
          rows.map((r) => r.day),
          rows.map((r) => r.hits),
          rows.map((r) => r.misses),
          rows.map((r) => r.saved),
        ],
      );
    } catch (e) {
      for (const r of rows) {
        const p = this.of(r.accountId);
        p.hits += r.hits;
        p.misses += r.misses;
        p.saved += r.saved;
      }
      throw e;
    }
  }

  /** The account's last `days` days (oldest first) and their totals. */
  async report(accountId: string, days: number): Promise<CacheStatsReport> {
    await this.flush().catch(() => undefined);
    const r = await this.db.query(
      `SELECT to_char(day, 'YYYY-MM-DD') AS day, hits, misses, saved_vnd FROM cache_stats
       WHERE account_id = $1 AND day > current_date - $2::int ORDER BY day`,
      [accountId, days],
    );
    const out: CacheStatsReport = { hits: 0, misses: 0, saved_vnd: 0, days: [] };
    for (const row of r.rows) {
      const d = { day: row.day, hits: Number(row.hits), misses: Number(row.misses), saved_vnd: Number(row.saved_vnd) };
      out.days.push(d);
      out.hits += d.hits;
      out.misses += d.misses;
      out.saved_vnd += d.saved_vnd;
    }
    return out;
  }
}
