import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';
import type { CacheStore, EntryOwner } from './store';
import { EntryBatch } from './batch';
import type { NewEntry } from './entry';
import { HitMemory } from './hitMemory';
import { KeyIndex } from './keyIndex';

/**
 * Entries in Redis (REDIS_URL): one string per entry with its TTL, its owner (account and model) beside it, and per
 * account and model (and per project) a set of its entries' keys so that they can be purged. The size cap is Redis's
 * own (maxmemory with an LRU eviction policy: docs/cache.md). Commands fail fast while Redis is unreachable (no
 * offline queue, a short command timeout): the request goes on as a miss.
 *
 * A miss must cost next to nothing, and a Redis command costs this process tens of µs of CPU (a GET on every miss and
 * a MULTI of seven commands per entry written were +135 % on a miss's CPU, measured), so the store keeps in memory:
 *   - the keys stored, with their expiry: a key not among them is a miss without a command. The index is loaded at
 *     start (a SCAN of the entries; until it has ended, an unknown key is looked up) and takes in the keys other
 *     processes write within `pollMs` (1 s): every write adds its keys to a sorted set of recent writes (`recent`,
 *     the last 60 s, by Redis's clock), which each process reads, less its own, every `pollMs`. A process that could
 *     not read it for 50 s SCANs again. A key it knows that Redis no longer has (expired, evicted, purged by another
 *     process) costs one GET, then is forgotten;
 *   - the entries hit in the last second (./hitMemory.ts): a hit on one within that second makes no command (a hit
 *     that asked Redis every time went there and back through another process on the request path, its p99 the
 *     bare proxy's or worse); a purge made by another process reaches this one within that second;
 *   - the entries to write, written by one script call every `flushMs` (1 s, or at once 512 at a time: a script
 *     holds Redis for every other client while it runs; each call wakes Redis and this process), off the
 *     request path; until then a hit reads the entry waiting.
 */
/**
 * ARGV: prefix, writer, the entries as JSON (./batch.ts packed(): k key, o 1-based offset, n size, t TTL seconds,
 * a account, m model, p project or null), their bodies one after the other: four arguments whatever the batch's
 * size (each argument costs this process its encoding).
 */
const WRITE = `
local p, w, bodies = ARGV[1], ARGV[2], ARGV[4]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local recent = p .. 'recent'
for _, e in ipairs(cjson.decode(ARGV[3])) do
  local k, ttl, a, m, pr = e.k, e.t, e.a, e.m, e.p
  redis.call('SET', p .. 'e:' .. k, string.sub(bodies, e.o, e.o + e.n - 1), 'EX', ttl)
  redis.call('SET', p .. 'o:' .. k, a .. '\\n' .. m, 'EX', ttl)
  local sets = { p .. 'm:' .. a .. ':' .. m }
  if pr and pr ~= cjson.null and pr ~= '' then sets[2] = p .. 'p:' .. a .. ':' .. pr end
  for _, s in ipairs(sets) do
    redis.call('SADD', s, k)
    redis.call('EXPIRE', s, ttl + 60, 'GT')
    redis.call('EXPIRE', s, ttl + 60, 'NX')
  end
  redis.call('ZADD', recent, now, w .. '|' .. k .. '|' .. (now + ttl * 1000))
end
redis.call('ZREMRANGEBYSCORE', recent, '-inf', now - 60000)
redis.call('PEXPIRE', recent, 120000)
return now
`;

/** ARGV: prefix, writer, since (Redis ms). Redis's time now, then the other writers' `writer|key|expiresAt` since. */
const POLL = `
local p, w, since = ARGV[1], ARGV[2], ARGV[3]
local t = redis.call('TIME')
local out = { tostring(tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)) }
local own = w .. '|'
for _, m in ipairs(redis.call('ZRANGEBYSCORE', p .. 'recent', since, '+inf')) do
  if string.sub(m, 1, #own) ~= own then out[#out + 1] = m end
end
return out
`;

type Scripted = Redis & {
  gwCacheWrite(prefix: string, writer: string, meta: string, bodies: Buffer): Promise<number>;
  gwCachePoll(prefix: string, writer: string, since: number): Promise<string[]>;
};

export class RedisCacheStore implements CacheStore {
  readonly name = 'redis' as const;
  private readonly redis: Scripted;
  /** The keys stored and their expiry (./keyIndex.ts: small integers, no object per key). */
  private readonly index = new KeyIndex();
  /** The entries hit in the last `memoryMs` (./hitMemory.ts). */
  private readonly memory: HitMemory;
  /** The index holds every key Redis had when this process started (the SCAN has ended). */
  private complete = false;
  private scanning: Promise<void> | null = null;
  /** The entries to write (./batch.ts: their bytes copied, so that no entry's own Buffer outlives its request). */
  private pending = new EntryBatch();
  /** The batch being written (one at a time). */
  private writing: EntryBatch | null = null;
  private spare: EntryBatch | null = null;
  private flushing: Promise<void> = Promise.resolve();
  private flushTimer: NodeJS.Timeout | null = null;
  private readonly pollTimer: NodeJS.Timeout;
  /** Redis's time (ms) from which the next poll reads the recent writes. */
  private since = 0;
  private lastPoll = Date.now();
  private readonly writer = randomUUID();

  constructor(
    url: string,
    private readonly prefix: string,
    timeoutMs: number,
    private readonly opts: {
      /** The longest TTL (the expiry given to keys found by the SCAN). */
      maxTtlSeconds?: number;
      flushMs?: number;
      pollMs?: number;
      /** How long an entry read from Redis answers hits from memory (default 1 s). */
      memoryMs?: number;
      memoryBytes?: number;
      /** A write that failed (its entries are lost: the next requests are misses). */
      onError?: (e: Error) => void;
    } = {},
  ) {
    this.memory = new HitMemory(opts.memoryBytes);
    this.redis = new Redis(url, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: timeoutMs,
      connectTimeout: Math.max(1000, timeoutMs),
      retryStrategy: (times) => Math.min(100 * times, 2000),
      enableAutoPipelining: true,
    }) as Scripted;
    this.redis.defineCommand('gwCacheWrite', { numberOfKeys: 0, lua: WRITE });
    this.redis.defineCommand('gwCachePoll', { numberOfKeys: 0, lua: POLL });
    this.redis.on('error', () => undefined); // each command reports its own failure
    this.redis.on('ready', () => void this.poll().catch(() => undefined));
    this.pollTimer = setInterval(() => void this.poll().catch(() => undefined), opts.pollMs ?? 1000);
    this.pollTimer.unref();
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

  /** Takes in the keys the other processes wrote since the last poll (the first one: SCANs every entry too). */
  private async poll(): Promise<void> {
    if (this.redis.status !== 'ready') return;
    // Too long without a poll: the recent writes kept (60 s) may not reach back far enough.
    if (Date.now() - this.lastPoll > 50_000) this.complete = false;
    if (!this.complete)
      this.scanning ??= this.scan()
        .catch(() => undefined) // the next poll scans again
        .finally(() => (this.scanning = null));
    const r = await this.redis.gwCachePoll(this.prefix, this.writer, this.since);
    this.lastPoll = Date.now();
    // A second back: a write that ran while the clocks stepped, or is taken in twice (harmless).
    this.since = Number(r[0]) - 1000;
    for (let i = 1; i < r.length; i++) {
      const m = r[i];
      const a = m.indexOf('|');
      const b = m.lastIndexOf('|');
      const key = m.slice(a + 1, b);
      this.index.set(key, Number(m.slice(b + 1)));
      this.memory.delete(key); // written again elsewhere: read afresh
    }
    this.index.prune(1000);
  }

  /** Every entry Redis has (keys only: each is given the longest TTL, and forgotten once a GET finds it gone). */
  private async scan(): Promise<void> {
    const at = this.prefix.length + 2;
    const exp = Date.now() + (this.opts.maxTtlSeconds ?? 7 * 86400) * 1000;
    let cursor = '0';
    do {
      const [next, keys] = await this.redis.scan(cursor, 'MATCH', `${this.entryKey('')}*`, 'COUNT', 1000);
      for (const k of keys) {
        const key = k.slice(at);
        if (!this.index.has(key)) this.index.set(key, exp);
      }
      cursor = next;
    } while (cursor !== '0');
    this.complete = true;
  }

  /** From memory at once (no promise) when it can: a key it does not know is a miss, one not yet written a hit. */
  get(key: string): Buffer | null | Promise<Buffer | null> {
    if (this.redis.status !== 'ready') throw new Error(`Redis is ${this.redis.status}`);
    const exp = this.index.get(key);
    if (exp === undefined) return this.complete ? null : this.read(key, undefined);
    const now = Date.now();
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

  /** `exp`: the key's expiry as the index has it (undefined: not in the index, not kept in memory). */
  private async read(key: string, exp: number | undefined): Promise<Buffer | null> {
    const buf = await this.redis.getBuffer(this.entryKey(key));
    if (buf) {
      if (exp !== undefined) this.memory.set(key, buf, exp, Date.now() + (this.opts.memoryMs ?? 1000));
    } else if (!this.pending.has(key) && !this.writing?.has(key)) this.index.delete(key);
    return buf;
  }

  private forget(key: string): void {
    this.memory.delete(key);
    this.index.delete(key);
    this.pending.delete(key);
    this.writing?.delete(key);
  }

  put(key: string, owner: EntryOwner, value: Buffer | NewEntry, ttlSeconds: number): void {
    // Not queued while Redis is down: the write would fail, and the entry waiting would answer hits meanwhile.
    if (this.redis.status !== 'ready') throw new Error(`Redis is ${this.redis.status}`);
    const now = Date.now();
    this.memory.delete(key);
    this.index.set(key, now + ttlSeconds * 1000);
    this.pending.add(key, owner, value, ttlSeconds, now + ttlSeconds * 1000, now);
    if (this.pending.full(512)) void this.flush().catch((e: Error) => this.opts.onError?.(e));
    else
      this.flushTimer ??= setTimeout(
        () => void this.flush().catch((e: Error) => this.opts.onError?.(e)),
        this.opts.flushMs ?? 1000,
      );
  }

  /** Writes the entries waiting (one script call). */
  flush(): Promise<void> {
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.flushTimer = null;
    // After the last write, whether it failed or not (a failed write would otherwise stop every later one).
    return (this.flushing = this.flushing.catch(() => undefined).then(() => this.write()));
  }

  private async write(): Promise<void> {
    if (!this.pending.size) return;
    // Still found by get() until written.
    const batch = (this.writing = this.pending);
    this.pending = this.spare ?? new EntryBatch();
    this.spare = null;
    try {
      const { bytes, json } = batch.packed();
      await this.redis.gwCacheWrite(this.prefix, this.writer, json, bytes);
    } catch (e) {
      // Lost: forgotten, so that the next requests are misses without a lookup (unless put again meanwhile).
      for (const i of batch.live()) if (!this.pending.has(batch.keys[i])) this.index.delete(batch.keys[i]);
      throw e;
    } finally {
      this.writing = null;
      batch.clear();
      this.spare = batch;
    }
  }

  async delete(key: string, accountId: string): Promise<boolean> {
    await this.flush().catch(() => undefined);
    const owner = await this.redis.get(this.ownerKey(key));
    if (!owner) return false;
    const [acct, model] = owner.split('\n');
    if (acct !== accountId) return false;
    const r = await this.redis
      .multi()
      .del(this.entryKey(key), this.ownerKey(key))
      .srem(this.modelSet(acct, model), key)
      .exec();
    this.forget(key);
    return Number(r?.[0]?.[1] ?? 0) > 0;
  }

  async drop(key: string): Promise<void> {
    this.forget(key);
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
    await this.flush().catch(() => undefined);
    const keys = await this.redis.smembers(set);
    if (!keys.length) {
      await this.redis.del(set);
      return 0;
    }
    const gone = await this.redis.del(...keys.map((k) => this.entryKey(k)));
    await this.redis.del(...keys.map((k) => this.ownerKey(k)), set);
    for (const k of keys) this.forget(k);
    return gone;
  }

  async close(): Promise<void> {
    clearInterval(this.pollTimer);
    await this.flush().catch(() => undefined);
    this.redis.disconnect();
  }
}
