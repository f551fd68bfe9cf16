import type { CacheSettings } from '../config';
import type { Db } from '../db';
import type { Pricing } from '../catalog';
import type { Logger, CacheMetrics } from '../observability';
import { CacheSettingsRepo } from './accountSettings';
import { decodeEntry, type CacheEntry, type NewEntry } from './entry';
import { PgCacheStore } from './pgStore';
import { ProjectLabels } from './projectLabels';
import { CacheStats } from './stats';
import type { CacheStore, EntryOwner } from './store';
import type { RedisCacheStore as RedisStore } from './redisStore';

interface Inc {
  inc(n?: number): void;
}
type OperationCounters = Record<'hit' | 'miss' | 'error' | 'saved', Inc>;

/**
 * The exact response cache: its storage, the accounts' settings, the stats and the hit price. Storage never fails
 * a request: a lookup that throws or takes longer than `timeoutMs` is a miss, a corrupt entry is dropped and is a
 * miss, a write that fails is logged and forgotten.
 */
export class ResponseCache {
  readonly settings: CacheSettingsRepo;
  readonly stats: CacheStats;
  /** The usage record's prices of a hit: the hit price per hit (re-priced by verify-ledger: billing/usageVerify.ts). */
  readonly hitPricing: Pricing;
  private readonly timer: NodeJS.Timeout;
  private readonly projectLabels: ProjectLabels;
  private readonly projectCounters = new Map<string, Record<'hit' | 'miss' | 'saved', Inc>>();
  private readonly operationCounters = new Map<string, OperationCounters>();
  private readonly storeCounters = new Map<string, Inc>();

  constructor(
    db: Db,
    readonly store: CacheStore,
    readonly config: CacheSettings,
    readonly metrics: CacheMetrics | null,
    private readonly logger: Logger | null,
    statsFlushMs = 2000,
  ) {
    if (!Number.isSafeInteger(config.hitPriceVnd) || config.hitPriceVnd < 0)
      throw new Error(`CACHE_HIT_PRICE_VND must be a whole number of VND, 0 or more, got ${config.hitPriceVnd}`);
    this.settings = new CacheSettingsRepo(db, config.settingsCacheMs, config.maxTtlSeconds);
    this.stats = new CacheStats(db);
    this.projectLabels = new ProjectLabels(config.metricsMaxProjects ?? 100);
    this.hitPricing = { cacheHitVnd: config.hitPriceVnd } as unknown as Pricing;
    this.timer = setInterval(() => void this.stats.flush().catch(() => undefined), statsFlushMs);
    this.timer.unref();
  }

  /** The per-operation counters, looked up once per operation (prom-client hashes the labels on every inc else). */
  private ofOperation(operation: string): OperationCounters | null {
    const m = this.metrics;
    if (!m) return null;
    let c = this.operationCounters.get(operation);
    if (!c)
      this.operationCounters.set(
        operation,
        (c = {
          hit: m.lookups.labels(operation, 'hit'),
          miss: m.lookups.labels(operation, 'miss'),
          error: m.lookups.labels(operation, 'error'),
          saved: m.savedVnd.labels(operation),
        }),
      );
    return c;
  }

  /** A lookup that failed (storage down or slow): a miss too. */
  countError(operation: string): void {
    this.ofOperation(operation)?.error.inc();
  }

  /** A miss: the metrics (per operation, per project) and the account's stats. */
  countMiss(operation: string, accountId: string, projectId: string | null | undefined): void {
    this.ofOperation(operation)?.miss.inc();
    this.countProject(projectId, 'miss', 0);
    this.stats.miss(accountId, projectId);
  }

  /** A hit, and the VND it saved. */
  countHit(operation: string, accountId: string, projectId: string | null | undefined, savedVnd: number): void {
    const c = this.ofOperation(operation);
    if (c) {
      c.hit.inc();
      c.saved.inc(savedVnd);
    }
    this.countProject(projectId, 'hit', savedVnd);
    this.stats.hit(accountId, projectId, savedVnd);
  }

  /** An answer offered to the cache: stored, or why not. */
  countStore(outcome: 'stored' | 'too_large' | 'incomplete' | 'error'): void {
    const m = this.metrics;
    if (!m) return;
    let c = this.storeCounters.get(outcome);
    if (!c) this.storeCounters.set(outcome, (c = m.stores.labels(outcome)));
    c.inc();
  }

  /** The per-project metrics of a hit or a miss (label values bounded: ./projectLabels.ts). */
  private countProject(projectId: string | null | undefined, result: 'hit' | 'miss', savedVnd: number): void {
    const m = this.metrics;
    if (!m) return;
    const project = this.projectLabels.of(projectId);
    // The label set's counters, looked up once per project.
    let c = this.projectCounters.get(project);
    if (!c)
      this.projectCounters.set(
        project,
        (c = {
          hit: m.projectLookups.labels(project, 'hit'),
          miss: m.projectLookups.labels(project, 'miss'),
          saved: m.projectSavedVnd.labels(project),
        }),
      );
    c[result].inc();
    if (savedVnd > 0) c.saved.inc(savedVnd);
  }

  get hitPriceVnd(): number {
    return this.config.hitPriceVnd;
  }

  /**
   * The entry stored under `key`, or null: none, expired, corrupt (then dropped), or the storage down or slow
   * ('error'). At once (no promise) when the store answered from memory, as the Postgres store does for a key it
   * does not hold: a promise and its turn of the microtask queue were part of what a miss cost.
   */
  lookup(key: string): CacheEntry | null | 'error' | Promise<CacheEntry | null | 'error'> {
    let got: Buffer | null | Promise<Buffer | null>;
    try {
      got = this.store.get(key);
    } catch (e) {
      return this.failed(e as Error);
    }
    if (got instanceof Promise)
      // A store that answered from memory needs no timeout (a timer and a race per miss were measurable).
      return within(got, this.config.timeoutMs).then(
        (buf) => this.decoded(key, buf),
        (e: Error) => this.failed(e),
      );
    return this.decoded(key, got);
  }

  private failed(e: Error): 'error' {
    this.logger?.warn({ err: e.message, store: this.store.name }, 'response cache lookup failed');
    return 'error';
  }

  private decoded(key: string, buf: Buffer | null): CacheEntry | null {
    if (!buf) return null;
    const entry = decodeEntry(buf, key);
    if (!entry) {
      this.logger?.warn({ key, store: this.store.name }, 'response cache entry corrupt: dropped');
      void this.store.drop(key).catch(() => undefined);
    }
    return entry;
  }

  /**
   * Stores a new answer (off the response path; its size bounded by the recorder, ./recorder.ts); failing: not
   * stored. The store makes its stored form when it writes.
   */
  save(key: string, owner: EntryOwner, entry: NewEntry, ttlSeconds: number): void {
    const failed = (e: Error) => {
      this.countStore('error');
      this.logger?.warn({ err: e.message, store: this.store.name }, 'response cache write failed');
    };
    try {
      const put = this.store.put(key, owner, entry, ttlSeconds);
      if (put instanceof Promise)
        within(put, Math.max(this.config.timeoutMs, 2000)).then(() => this.countStore('stored'), failed);
      else this.countStore('stored');
    } catch (e) {
      failed(e as Error);
    }
  }

  /** Writes the entries waiting now (./store.ts flush). */
  flush(): Promise<void> {
    return this.store.flush();
  }

  delete(key: string, accountId: string): Promise<boolean> {
    return this.store.delete(key, accountId);
  }

  purgeModel(accountId: string, model: string): Promise<number> {
    return this.store.purgeModel(accountId, model);
  }

  purgeProject(accountId: string, projectId: string): Promise<number> {
    return this.store.purgeProject(accountId, projectId);
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.stats.flush().catch(() => undefined);
    await this.store.close();
  }
}

/** `p`, or a rejection once `ms` have passed. */
function within<T>(p: Promise<T>, ms: number): Promise<T> {
  let t: NodeJS.Timeout;
  const timeout = new Promise<never>((_, reject) => {
    t = setTimeout(() => reject(new Error(`response cache storage took over ${ms} ms`)), ms);
    t.unref();
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(t));
}

export interface CacheDeps {
  db: Db;
  config: CacheSettings;
  redisUrl: string | null;
  metrics?: CacheMetrics | null;
  logger?: Logger | null;
}

/** The cache of an API process: Redis with REDIS_URL, else Postgres; null when CACHE_ENABLED=false. */
export function createResponseCache(d: CacheDeps): ResponseCache | null {
  if (!d.config.enabled) return null;
  let store: CacheStore;
  if (d.redisUrl) {
    // Loaded only when configured (ioredis adds resident memory a process without Redis never uses).
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { RedisCacheStore } = require('./redisStore') as { RedisCacheStore: typeof RedisStore };
    store = new RedisCacheStore(d.redisUrl, d.config.redisPrefix, d.config.timeoutMs, {
      maxTtlSeconds: d.config.maxTtlSeconds,
      flushMs: d.config.flushMs,
      onError: (e) => d.logger?.warn({ err: e.message }, 'response cache write failed'),
    });
  } else
    store = new PgCacheStore(d.db, d.config.maxTotalBytes, 1000, {
      flushMs: d.config.flushMs,
      onError: (e) => d.logger?.warn({ err: e.message }, 'response cache write failed'),
    });
  return new ResponseCache(d.db, store, d.config, d.metrics ?? null, d.logger ?? null);
}
