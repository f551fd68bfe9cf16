import Redis from 'ioredis';
import type { CacheStore, EntryOwner } from './store';

/**
 * Entries in Redis (REDIS_URL): one string per entry with its TTL (SET EX), and per account and model a set of its
 * entries' keys so that a model's entries can be purged. The size cap is Redis's own (maxmemory with an LRU
 * eviction policy: docs/cache.md). Commands fail fast while Redis is unreachable (no offline queue, a short
 * command timeout): the request goes on as a miss.
 */
export class RedisCacheStore implements CacheStore {
  readonly name = 'redis' as const;
  private readonly redis: Redis;

  constructor(
    url: string,
    private readonly prefix: string,
    timeoutMs: number,
  ) {
    this.redis = new Redis(url, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: timeoutMs,
      connectTimeout: Math.max(1000, timeoutMs),
      retryStrategy: (times) => Math.min(100 * times, 2000),
      enableAutoPipelining: true,
    });
    this.redis.on('error', () => undefined); // each command reports its own failure
  }

  private entryKey(key: string): string {
    return `${this.prefix}e:${key}`;
  }
  private modelSet(accountId: string, model: string): string {
    return `${this.prefix}m:${accountId}:${model}`;
  }
  private projectSet(accountId: string, projectId: string): string {
    return `${this.prefix}p:${accountId}:${projectId}`;
  }
  private ownerKey(key: string): string {
    return `${this.prefix}o:${key}`;
  }

  get(key: string): Promise<Buffer | null> {
    return this.redis.getBuffer(this.entryKey(key));
  }

  async put(key: string, owner: EntryOwner, value: Buffer, ttlSeconds: number): Promise<void> {
    const m = this.redis
      .multi()
      .set(this.entryKey(key), value, 'EX', ttlSeconds)
      .set(this.ownerKey(key), `${owner.accountId}\n${owner.model}`, 'EX', ttlSeconds);
    const sets = [this.modelSet(owner.accountId, owner.model)];
    if (owner.projectId) sets.push(this.projectSet(owner.accountId, owner.projectId));
    // Each set outlives its longest entry a little; keys of expired entries in it are harmless (DEL of nothing).
    for (const set of sets)
      m.sadd(set, key)
        .expire(set, ttlSeconds + 60, 'GT')
        .expire(set, ttlSeconds + 60, 'NX');
    await m.exec();
  }

  async delete(key: string, accountId: string): Promise<boolean> {
    const owner = await this.redis.get(this.ownerKey(key));
    if (!owner) return false;
    const [acct, model] = owner.split('\n');
    if (acct !== accountId) return false;
    const r = await this.redis
      .multi()
      .del(this.entryKey(key), this.ownerKey(key))
      .srem(this.modelSet(acct, model), key)
      .exec();
    return Number(r?.[0]?.[1] ?? 0) > 0;
  }

  async drop(key: string): Promise<void> {
    await this.redis.del(this.entryKey(key), this.ownerKey(key));
  }

  purgeModel(accountId: string, model: string): Promise<number> {
    return this.purgeSet(this.modelSet(accountId, model));
  }

  /** A purged entry's key may stay in its other set (model or project) until that set expires: a DEL of nothing. */
  purgeProject(accountId: string, projectId: string): Promise<number> {
    return this.purgeSet(this.projectSet(accountId, projectId));
  }

  private async purgeSet(set: string): Promise<number> {
    const keys = await this.redis.smembers(set);
    if (!keys.length) {
      await this.redis.del(set);
      return 0;
    }
    const gone = await this.redis.del(...keys.map((k) => this.entryKey(k)));
    await this.redis.del(...keys.map((k) => this.ownerKey(k)), set);
    return gone;
  }

  async close(): Promise<void> {
    this.redis.disconnect();
  }
}
