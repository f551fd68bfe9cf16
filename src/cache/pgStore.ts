import type { Db } from '../db/pool';
import type { CacheStore, EntryOwner } from './store';

/**
 * Entries in Postgres (table response_cache, migration 220): read only while unexpired; the total size kept under
 * `maxTotalBytes` by evicting the oldest entries, and the expired ones deleted, at most once per `sweepMs` per
 * process, after a write (never on a read's path).
 */
export class PgCacheStore implements CacheStore {
  readonly name = 'postgres' as const;
  private lastSweep = 0;
  private sweeping: Promise<void> | null = null;

  constructor(
    private readonly db: Db,
    private readonly maxTotalBytes: number,
    private readonly sweepMs = 1000,
  ) {}

  async get(key: string): Promise<Buffer | null> {
    const r = await this.db.query<{ body: Buffer }>(
      'SELECT body FROM response_cache WHERE key = $1 AND expires_at > now()',
      [key],
    );
    return r.rows[0]?.body ?? null;
  }

  async put(key: string, owner: EntryOwner, value: Buffer, ttlSeconds: number): Promise<void> {
    await this.db.query(
      `INSERT INTO response_cache (key, account_id, model, body, size, expires_at)
       VALUES ($1, $2, $3, $4, $5, now() + make_interval(secs => $6))
       ON CONFLICT (key) DO UPDATE SET body = EXCLUDED.body, size = EXCLUDED.size, model = EXCLUDED.model,
         expires_at = EXCLUDED.expires_at, created_at = now()`,
      [key, owner.accountId, owner.model, value, value.length, ttlSeconds],
    );
    if (Date.now() - this.lastSweep >= this.sweepMs) await this.sweep();
  }

  /** Deletes the expired entries, then the oldest beyond the size cap. */
  sweep(): Promise<void> {
    return (this.sweeping ??= this.runSweep().finally(() => {
      this.lastSweep = Date.now();
      this.sweeping = null;
    }));
  }

  private async runSweep(): Promise<void> {
    await this.db.query('DELETE FROM response_cache WHERE expires_at <= now()');
    await this.db.query(
      `DELETE FROM response_cache WHERE key IN (
         SELECT key FROM (SELECT key, sum(size) OVER (ORDER BY created_at DESC, key) AS running
                          FROM response_cache) t
         WHERE running > $1)`,
      [this.maxTotalBytes],
    );
  }

  async delete(key: string, accountId: string): Promise<boolean> {
    const r = await this.db.query('DELETE FROM response_cache WHERE key = $1 AND account_id = $2', [key, accountId]);
    return (r.rowCount ?? 0) > 0;
  }

  async drop(key: string): Promise<void> {
    await this.db.query('DELETE FROM response_cache WHERE key = $1', [key]);
  }

  async purgeModel(accountId: string, model: string): Promise<number> {
    const r = await this.db.query('DELETE FROM response_cache WHERE account_id = $1 AND model = $2', [
      accountId,
      model,
    ]);
    return r.rowCount ?? 0;
  }

  async close(): Promise<void> {
    await this.sweeping;
  }
}
