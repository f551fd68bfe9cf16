import type { CacheSettings } from '../config';
import type { Db } from '../db';
import type { Pricing } from '../catalog';
import type { Logger, CacheMetrics } from '../observability';
import { CacheSettingsRepo } from './accountSettings';
import { decodeEntry, encodeEntry, type CacheEntry } from './entry';
import { PgCacheStore } from './pgStore';
import { ProjectLabels } from './projectLabels';
import { CacheStats } from './stats';
import type { CacheStore, EntryOwner } from './store';
import type { RedisCacheStore as RedisStore } from './redisStore';

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
  private readonly projectCounters = new Map<string, Record<'hit' | 'miss' | 'saved', { inc(n?: number): void }>>();

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

  /** The per-project metrics of a hit or a miss (label values bounded: ./projectLabels.ts). */
  countProject(projectId: string | null | undefined, result: 'hit' | 'miss', savedVnd: number): void {
    const m = this.metrics;
    if (!m) return;
    const project = this.projectLabels.of(projectId);
    // The label set's counters, looked up once per project (prom-client hashes the labels on every inc otherwise).
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

  /** The entry stored under `key`, or null: none, expired, corrupt (then dropped), or the storage down or slow. */
  async lookup(key: string): Promise<CacheEntry | null | 'error'> {
    let buf: Buffer | null;
    try {
      const got = this.store.get(key);
      // A store that answered from memory needs no timeout (a timer and a race per miss were measurable).
      buf = got instanceof Promise ? await within(got, this.config.timeoutMs) : got;
    } catch (e) {
      this.logger?.warn({ err: (e as Error).message, store: this.store.name }, 'response cache lookup failed');
      return 'error';
    }
    if (!buf) return null;
    const entry = decodeEntry(buf, key);
    if (!entry) {
      this.logger?.warn({ key, store: this.store.name }, 'response cache entry corrupt: dropped');
      void this.store.drop(key).catch(() => undefined);
    }
    return entry;
  }

  /** Stores an entry (off the response path); too large or failing: not stored. */
  save(key: string, owner: EntryOwner, entry: CacheEntry, ttlSeconds: number): void {
    const buf = encodeEntry(entry);
    if (buf.length > this.config.maxEntryBytes) {
      this.metrics?.stores.inc({ outcome: 'too_large' });
      return;
    }
    const failed = (e: Error) => {
      this.metrics?.stores.inc({ outcome: 'error' });
      this.logger?.warn({ err: e.message, store: this.store.name }, 'response cache write failed');
    };
    try {
      const put = this.store.put(key, owner, buf, ttlSeconds);
      if (put instanceof Promise)
        within(put, Math.max(this.config.timeoutMs, 2000)).then(
          () => this.metrics?.stores.inc({ outcome: 'stored' }),
          failed,
        );
      else this.metrics?.stores.inc({ outcome: 'stored' });
    } catch (e) {
      failed(e as Error);
    }
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
    store = new RedisCacheStore(d.redisUrl, d.config.redisPrefix, d.config.timeoutMs);
  } else
    store = new PgCacheStore(d.db, d.config.maxTotalBytes, 1000, {
      onError: (e) => d.logger?.warn({ err: e.message }, 'response cache write failed'),
    });
  return new ResponseCache(d.db, store, d.config, d.metrics ?? null, d.logger ?? null);
}
