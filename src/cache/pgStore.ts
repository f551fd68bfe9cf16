import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Db } from '../db';
import type { CacheStore, EntryOwner } from './store';
import { EntryBatch } from './batch';
import type { NewEntry } from './entry';
import { HitMemory } from './hitMemory';
import { KeyIndex } from './keyIndex';

/**
 * Entries in Postgres (table response_cache, migration 220), for a gateway without Redis (REDIS_URL unset: one API
 * process, as `npm start` runs it). A miss must cost next to nothing (a database round trip is 80 to 160 µs of this
 * process's CPU, most of what a miss would add), so the store keeps in memory:
 *   - the keys it knows are stored, with their expiry: a key not among them is a miss without a query (the index is
 *     loaded at start and takes in other processes' new entries every `refreshMs`; a key it has not seen yet is a
 *     miss that could have been a hit, never a wrong answer);
 *   - the entries recently hit, up to `memoryBytes`: a hit on one makes no query either (an entry is kept from its
 *     first hit, not from its write: most stored answers are never asked for again);
 *   - the entries to write, written in one INSERT every `flushMs` (1 s; sooner 4,096 at a time), off the request
 *     path. Each write wakes the database and this process's reading of its answer, whatever its size: written
 *     every 100 ms (256 at a time), that was most of what the cache added to a miss's CPU (measured: 11 % against 2
 *     % written every second).
 * The total size is kept under `maxTotalBytes` by evicting the oldest entries, and the expired ones deleted, after a
 * write at most once per `sweepMs`. A purge made by another process reaches this one's memory within `refreshMs`
 * only for new entries: docs/cache.md says to run Redis with more than one API process.
 */
export class PgCacheStore implements CacheStore {
  readonly name = 'postgres' as const;
  /** The keys stored and their expiry (./keyIndex.ts: small integers, no object per key). */
  private readonly index = new KeyIndex();
  /** The entries recently hit (./hitMemory.ts). */
  private readonly memory: HitMemory;
  /** The entries to write (./batch.ts: their bytes copied, so that no entry's own Buffer outlives its request). */
  private pending = new EntryBatch();
  /** The batch being written (one at a time). */
  private writing: EntryBatch | null = null;
  private spare: EntryBatch | null = null;
  private flushing: Promise<void> = Promise.resolve();
  private flushTimer: NodeJS.Timeout | null = null;
  private refreshTimer: NodeJS.Timeout | null = null;
  private lastSweep = 0;
  /** The table's total size as of the last sweep plus what was written since (null: not known yet). */
  private approxTotal: number | null = null;
  /** Epoch ms: entries created since are read again by the next refresh. */
  private seenUntil = 0;
  /** The newest entry this process has written (epoch ms), less a second for clocks and commits in flight. */
  private writtenUntil = 0;
  /** This process's entries say so (column writer): its refreshes skip them. */
  private readonly writer = randomUUID();
  private ready: Promise<void>;

  constructor(
    private readonly db: Db,
    private readonly maxTotalBytes: number,
    private readonly sweepMs = 1000,
    private readonly opts: {
      memoryBytes?: number;
      flushMs?: number;
      refreshMs?: number;
      /** A write that failed (its entries are lost: the next requests are misses). */
      onError?: (e: Error) => void;
    } = {},
  ) {
    this.memory = new HitMemory(opts.memoryBytes);
    this.ready = this.refresh().catch(() => undefined);
    const refreshMs = opts.refreshMs ?? 5000;
    this.refreshTimer = setInterval(() => void this.refresh().catch(() => undefined), refreshMs);
    this.refreshTimer.unref();
  }

  /** Takes in the entries written since the last look (all of them at start). */
  private async refresh(): Promise<void> {
    // Not this process's own entries (it knows them): reading them back cost a few µs of CPU per miss. Times as
    // epoch milliseconds (float8): parsing a timestamptz into a Date per row costs more.
    const r = await this.db.query<{ key: string; exp: number; created: number }>(
      `SELECT key, extract(epoch FROM expires_at)::float8 * 1000 AS exp,
         extract(epoch FROM created_at)::float8 * 1000 AS created
       FROM response_cache
       WHERE created_at >= to_timestamp($1 / 1000.0) AND expires_at > now() AND writer IS DISTINCT FROM $2::uuid`,
      [this.seenUntil, this.writer],
    );
    for (const row of r.rows) {
      this.index.set(row.key, row.exp);
      if (row.created > this.seenUntil) this.seenUntil = row.created;
    }
    // Own writes move the mark on too, so that the scan stays short however long no other process writes.
    if (this.writtenUntil > this.seenUntil) this.seenUntil = this.writtenUntil;
  }

  /** From memory at once (no promise) when it can: a key it does not know, a recent entry, one not yet written. */
  get(key: string): Buffer | null | Promise<Buffer | null> {
    const now = Date.now();
    const exp = this.index.get(key);
    if (exp === undefined) return null;
    if (exp <= now) {
      this.forget(key);
      return null;
    }
    const kept = this.memory.get(key, now);
    if (kept) return kept;
    const waiting = this.pending.get(key) ?? this.writing?.get(key);
    if (waiting) return waiting;
    return this.read(key, exp);
  }

  private async read(key: string, exp: number): Promise<Buffer | null> {
    const r = await this.db.query<{ body: Buffer }>(
      'SELECT body FROM response_cache WHERE key = $1 AND expires_at > now()',
      [key],
    );
    const buf = r.rows[0]?.body ?? null;
    if (buf) this.memory.set(key, buf, exp);
    else {
      // Put again while the query ran: not gone.
      const waiting = this.pending.get(key) ?? this.writing?.get(key);
      if (waiting) return waiting;
      this.index.delete(key);
    }
    return buf;
  }

  private forget(key: string): void {
    this.index.delete(key);
    this.pending.delete(key);
    this.writing?.delete(key);
    this.memory.delete(key);
  }

  put(key: string, owner: EntryOwner, value: Buffer | NewEntry, ttlSeconds: number): void {
    // With its fraction of a millisecond: the size cap evicts by this order, and writes come faster than 1 ms apart.
    const createdAt = performance.timeOrigin + performance.now();
    const expiresAt = Date.now() + ttlSeconds * 1000;
    this.index.set(key, expiresAt);
    // Not kept among the recent entries: most answers stored are never asked for again, and holding every new one
    // (up to memoryBytes) showed as garbage collection in a miss's CPU. A hit reads it from pending until it is
    // written, then once from the table, and keeps it from there.
    this.memory.delete(key);
    this.pending.add(key, owner, value, ttlSeconds, expiresAt, createdAt);
    if (this.pending.full(4096)) void this.flush().catch((e: Error) => this.opts.onError?.(e));
    else
      this.flushTimer ??= setTimeout(
        () => void this.flush().catch((e: Error) => this.opts.onError?.(e)),
        this.opts.flushMs ?? 1000,
      );
  }

  /** Writes the entries waiting (one INSERT), then sweeps when one is due. */
  flush(): Promise<void> {
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.flushTimer = null;
    // After the last write, whether it failed or not (a failed write would otherwise stop every later one).
    return (this.flushing = this.flushing.catch(() => undefined).then(() => this.write()));
  }

  private async write(): Promise<void> {
    await this.ready;
    if (this.pending.size) {
      // Still found by get() until the INSERT has committed (a read of the table before then finds nothing).
      const batch = (this.writing = this.pending);
      this.pending = this.spare ?? new EntryBatch();
      this.spare = null;
      // The bodies go as one bytea parameter, sent in binary, cut apart by their offsets in the database (a bytea[]
      // parameter is sent as text, every body hex-encoded here and decoded there); the rest as one JSON text of
      // the rows (JSON.stringify is native: the pg client escapes each element of an array parameter in JS).
      let newest = 0;
      try {
        const packed = batch.packed();
        newest = packed.newest;
        if (this.approxTotal !== null) this.approxTotal += packed.bytes.length;
        await this.db.query(
          `INSERT INTO response_cache (key, account_id, model, body, size, expires_at, created_at, project_id, writer)
           SELECT k, a, m, substring($2::bytea FROM o FOR n), n, to_timestamp(e / 1000.0), to_timestamp(c / 1000.0),
             p, $3::uuid
           FROM json_to_recordset($1::json) AS t(k text, a uuid, m text, o int, n int, e float8, c float8, p text)
           ON CONFLICT (key) DO UPDATE SET body = EXCLUDED.body, size = EXCLUDED.size, model = EXCLUDED.model,
             project_id = EXCLUDED.project_id, writer = EXCLUDED.writer,
             expires_at = EXCLUDED.expires_at, created_at = EXCLUDED.created_at`,
          [packed.json, packed.bytes, this.writer],
        );
      } finally {
        this.writing = null;
        batch.clear();
        this.spare = batch;
      }
      if (newest - 1000 > this.writtenUntil) this.writtenUntil = newest - 1000;
    }
    if (Date.now() - this.lastSweep >= this.sweepMs) {
      this.lastSweep = Date.now();
      await this.sweep();
    }
  }

  /**
   * Deletes the expired entries (by their index), then, when the total may be over the cap, the oldest beyond it
   * (a scan of the table: only then), and forgets them here.
   */
  private async sweep(): Promise<void> {
    const expired = await this.db.query<{ key: string }>(
      'DELETE FROM response_cache WHERE expires_at <= now() RETURNING key',
    );
    for (const r of expired.rows) this.forget(r.key);
    if (this.approxTotal === null || this.approxTotal > this.maxTotalBytes) {
      const r = await this.db.query<{ total: string | null }>('SELECT sum(size) AS total FROM response_cache');
      this.approxTotal = Number(r.rows[0].total ?? 0);
    }
    if (this.approxTotal <= this.maxTotalBytes) return;
    const gone = await this.db.query<{ key: string; size: number }>(
      `DELETE FROM response_cache WHERE key IN (
         SELECT key FROM (SELECT key, sum(size) OVER (ORDER BY created_at DESC, key) AS running
                          FROM response_cache) t
         WHERE running > $1)
       RETURNING key, size`,
      [this.maxTotalBytes],
    );
    for (const r of gone.rows) {
      this.forget(r.key);
      this.approxTotal -= r.size;
    }
  }

  async delete(key: string, accountId: string): Promise<boolean> {
    await this.flush();
    const r = await this.db.query('DELETE FROM response_cache WHERE key = $1 AND account_id = $2', [key, accountId]);
    const deleted = (r.rowCount ?? 0) > 0;
    if (deleted) this.forget(key);
    return deleted;
  }

  async drop(key: string): Promise<void> {
    this.forget(key);
    await this.db.query('DELETE FROM response_cache WHERE key = $1', [key]);
  }

  purgeModel(accountId: string, model: string): Promise<number> {
    return this.purgeWhere('model', accountId, model);
  }

  purgeProject(accountId: string, projectId: string): Promise<number> {
    return this.purgeWhere('project_id', accountId, projectId);
  }

  private async purgeWhere(column: 'model' | 'project_id', accountId: string, value: string): Promise<number> {
    await this.flush();
    const r = await this.db.query<{ key: string }>(
      `DELETE FROM response_cache WHERE account_id = $1 AND ${column} = $2 RETURNING key`,
      [accountId, value],
    );
    for (const row of r.rows) this.forget(row.key);
    return r.rowCount ?? 0;
  }

  async close(): Promise<void> {
    if (this.refreshTimer) clearInterval(this.refreshTimer);
    await this.flush().catch(() => undefined);
  }
}
