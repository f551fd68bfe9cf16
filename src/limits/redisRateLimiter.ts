import Redis from 'ioredis';
import type { Logger } from '../observability/logger';
import { admissionId, MemoryRateLimiter, WINDOW_MS, windowView, type Admission, type RateLimiter, type RateLimits, type TokenTicket, type WindowUsage, type WindowView } from './rateLimiter';

/**
 * The sliding window of rateLimiter.ts in Redis, shared by every API process: one EVALSHA per check (the script
 * expires old entries, decides and records atomically, on Redis's clock), one fire-and-forget call to correct the
 * tokens at settlement. Per key: a sorted set of admitted requests, a sorted set of token entries (member
 * `<id>:<tokens>`) and their running total; every key carries a TTL of one window.
 *
 * If Redis cannot be reached (connection down, or no answer within `timeoutMs`) the request is decided by an
 * in-process window instead: the gateway keeps serving and keeps limiting, per process, and says so in the log,
 * in `gateway_ratelimit_redis_up` / `gateway_ratelimit_local_decisions_total` and in /readyz.
 */

const CHECK = `
local rk, tk, sk = KEYS[1], KEYS[2], KEYS[3]
local rpm, tpm, cost, id, win = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local from = now - win
local count, used = 0, 0
if rpm > 0 then
  redis.call('ZREMRANGEBYSCORE', rk, '-inf', from)
  count = redis.call('ZCARD', rk)
end
if tpm > 0 then
  used = tonumber(redis.call('GET', sk) or '0')
  local old = redis.call('ZRANGEBYSCORE', tk, '-inf', from)
  if #old > 0 then
    for i = 1, #old do used = used - tonumber(string.match(old[i], ':(%d+)$')) end
    redis.call('ZREMRANGEBYSCORE', tk, '-inf', from)
    if used < 0 or redis.call('ZCARD', tk) == 0 then used = 0 end
    redis.call('SET', sk, used, 'PX', win)
  end
end
local status, retry = 0, 0
if rpm > 0 and count >= rpm then
  status = 1
  local e = redis.call('ZRANGE', rk, count - rpm, count - rpm, 'WITHSCORES')
  retry = tonumber(e[2]) + win - now
end
if tpm > 0 and cost > tpm then
  status = 3
elseif tpm > 0 and used + cost > tpm then
  if status == 0 then status = 2 end
  local es = redis.call('ZRANGE', tk, 0, -1, 'WITHSCORES')
  local freed, at = 0, now
  for i = 1, #es, 2 do
    freed = freed + tonumber(string.match(es[i], ':(%d+)$'))
    if used - freed + cost <= tpm then at = tonumber(es[i + 1]); break end
  end
  retry = math.max(retry, at + win - now)
end
if status == 0 then
  if rpm > 0 then
    redis.call('ZADD', rk, now, id)
    redis.call('PEXPIRE', rk, win)
    count = count + 1
  end
  if tpm > 0 then
    redis.call('ZADD', tk, now, id .. ':' .. cost)
    redis.call('PEXPIRE', tk, win)
    used = used + cost
    redis.call('SET', sk, used, 'PX', win)
  end
end
local rreset, treset = 0, 0
if rpm > 0 then
  local e = redis.call('ZRANGE', rk, -1, -1, 'WITHSCORES')
  if #e > 0 then rreset = tonumber(e[2]) + win - now end
end
if tpm > 0 then
  local e = redis.call('ZRANGE', tk, -1, -1, 'WITHSCORES')
  if #e > 0 then treset = tonumber(e[2]) + win - now end
end
return {status, now, count, used, retry, rreset, treset}
`;

// Corrections of one key's admitted requests, four arguments each: old member, id, actual tokens, counted tokens.
// An entry already out of the window was subtracted with its counted tokens, so it is left alone.
const SETTLE = `
local tk, sk = KEYS[1], KEYS[2]
local delta, done = 0, 0
for i = 1, #ARGV, 4 do
  local old, id, n, oldn = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
  local s = redis.call('ZSCORE', tk, old)
  if s then
    redis.call('ZREM', tk, old)
    redis.call('ZADD', tk, s, id .. ':' .. n)
    delta = delta + n - oldn
    done = done + 1
  end
end
if delta ~= 0 and redis.call('INCRBY', sk, delta) < 0 then redis.call('SET', sk, 0, 'KEEPTTL') end
return done
`;

// Read-only: the requests and tokens of one key in the window (console pages; not on the request path).
const USAGE = `
local t = redis.call('TIME')
local from = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) - tonumber(ARGV[1])
local tokens = 0
for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. from, '+inf')) do tokens = tokens + tonumber(string.match(m, ':(%d+)$')) end
return {redis.call('ZCOUNT', KEYS[1], '(' .. from, '+inf'), tokens}
`;

// Read-only: a key's requests and tokens in the window and until it is replenished (the rate-limit headers of a
// response no check was made for: GET routes, a request refused before its check).
const PEEK = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local from = now - tonumber(ARGV[1])
local tokens, treset, rreset = 0, 0, 0
local es = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. from, '+inf', 'WITHSCORES')
for i = 1, #es, 2 do tokens = tokens + tonumber(string.match(es[i], ':(%d+)$')) end
if #es > 0 then treset = tonumber(es[#es]) + tonumber(ARGV[1]) - now end
local count = redis.call('ZCOUNT', KEYS[1], '(' .. from, '+inf')
if count > 0 then
  local e = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  rreset = tonumber(e[2]) + tonumber(ARGV[1]) - now
end
return {count, tokens, rreset, treset}
`;

type Limited = Redis & {
  rlPeek(rk: string, tk: string, win: number): Promise<number[]>;
  rlUsage(rk: string, tk: string, win: number): Promise<number[]>;
  rlCheck(rk: string, tk: string, sk: string, rpm: number, tpm: number, cost: number, id: string, win: number): Promise<number[]>;
  rlSettle(tk: string, sk: string, ...corrections: (string | number)[]): Promise<number>;
};

const CORRECTION_BATCH_MS = 20;

const STATUS: Admission['refused'][] = [undefined, 'requests', 'tokens', 'too_large'];

export interface RedisRateLimiterOptions {
  url: string;
  /** Prefix of every Redis key (several deployments or test runs may share one Redis). */
  prefix: string;
  /** How long a check waits for Redis before deciding in-process. */
  timeoutMs: number;
  logger?: Logger;
  /** Called when Redis becomes reachable (true) or unreachable (false). */
  onStatus?: (up: boolean) => void;
  /** Called for each request decided in-process because Redis was unreachable. */
  onLocalDecision?: () => void;
}

export class RedisRateLimiter implements RateLimiter {
  private readonly redis: Limited;
  private readonly local = new MemoryRateLimiter();
  private up = false;
  private reportedDown = false;
  /** Token corrections waiting for the next batch (see settle). */
  private corrections: { ticket: TokenTicket; n: number }[] = [];
  private correctionTimer: NodeJS.Timeout;

  constructor(private readonly opts: RedisRateLimiterOptions) {
    this.redis = new Redis(opts.url, {
      // Fail fast instead of queueing while disconnected: the in-process window decides meanwhile.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: opts.timeoutMs,
      connectTimeout: Math.max(1000, opts.timeoutMs),
      retryStrategy: (times) => Math.min(100 * times, 2000),
      lazyConnect: false,
      // The checks of concurrent requests issued in one tick leave in one write (one syscall, not one each).
      enableAutoPipelining: true,
    }) as Limited;
    this.redis.defineCommand('rlCheck', { numberOfKeys: 3, lua: CHECK });
    this.redis.defineCommand('rlSettle', { numberOfKeys: 2, lua: SETTLE });
    this.redis.defineCommand('rlUsage', { numberOfKeys: 2, lua: USAGE });
    this.redis.defineCommand('rlPeek', { numberOfKeys: 2, lua: PEEK });
    this.redis.on('ready', () => this.setUp(true));
    this.redis.on('close', () => this.setUp(false));
    // Reported once per outage through setUp; also when Redis is unreachable from the start (never 'ready').
    this.redis.on('error', (e: Error) => {
      if (this.up || this.reportedDown) return;
      this.reportedDown = true;
      this.opts.logger?.error({ err: e.message }, 'rate limiter: Redis unreachable; limiting per process until it is back');
    });
    this.opts.onStatus?.(false);
    this.correctionTimer = setInterval(() => this.sendCorrections(), CORRECTION_BATCH_MS);
    this.correctionTimer.unref();
  }

  get mode(): string {
    return this.up ? 'redis' : 'memory (redis unreachable)';
  }

  /** Resolves once Redis is ready (start-up and tests); false after `ms` without it. */
  async ready(ms = 5000): Promise<boolean> {
    if (this.up) return true;
    return new Promise((resolve) => {
      const t = setTimeout(() => { this.redis.off('ready', on); resolve(false); }, ms);
      const on = () => { clearTimeout(t); resolve(true); };
      this.redis.once('ready', on);
    });
  }

  private setUp(up: boolean): void {
    if (up === this.up) return;
    this.up = up;
    if (up) {
      this.reportedDown = false;
      this.opts.logger?.info('rate limiter: Redis reachable; limits are shared by all API processes');
    } else if (!this.reportedDown) {
      this.reportedDown = true;
      this.opts.logger?.error('rate limiter: Redis unreachable; limiting per process until it is back');
    }
    this.opts.onStatus?.(up);
  }

  private keys(keyId: string): [string, string, string] {
    // One hash tag per API key: a key's three entries live on one Redis Cluster slot.
    const base = `${this.opts.prefix}{${keyId}}`;
    return [`${base}:r`, `${base}:t`, `${base}:ts`];
  }

  async check(keyId: string, limits: RateLimits, tokens: number): Promise<Admission> {
    if (this.up) {
      const id = admissionId();
      const [rk, tk, sk] = this.keys(keyId);
      const rpm = limits.rpm ?? 0;
      const tpm = limits.tpm ?? 0;
      try {
        const [status, now, count, used, retry, rreset, treset] = await this.redis.rlCheck(rk, tk, sk, rpm, tpm, tokens, id, WINDOW_MS);
        const refused = STATUS[status];
        return {
          allowed: status === 0, refused, retryAfterMs: Math.max(0, retry),
          requests: rpm > 0 ? { limit: rpm, remaining: Math.max(0, rpm - count), resetMs: rreset } : null,
          tokens: tpm > 0 ? { limit: tpm, remaining: Math.max(0, tpm - used), resetMs: treset } : null,
          ticket: status === 0 && tpm > 0 ? { keyId, id, tokens, at: now } : null,
        };
      } catch (e) {
        // A timeout or a dropped connection: decide this request locally (never fail open, never 500).
        this.opts.logger?.warn({ err: (e as Error).message }, 'rate limiter: Redis check failed; decided in-process');
        if (this.redis.status !== 'ready') this.setUp(false);
      }
    }
    this.opts.onLocalDecision?.();
    return this.local.check(keyId, limits, tokens);
  }

  async peek(keyId: string, limits: RateLimits): Promise<WindowView> {
    if (this.up) {
      const [rk, tk] = this.keys(keyId);
      try {
        const [count, tokens, rreset, treset] = await this.redis.rlPeek(rk, tk, WINDOW_MS);
        return windowView(limits, count, tokens, rreset, treset);
      } catch {
        // As check: the in-process window answers meanwhile.
      }
    }
    return this.local.peek(keyId, limits);
  }

  /**
   * Corrections are sent in batches every CORRECTION_BATCH_MS, one script call per API key: a second Redis
   * command per request cost as much client CPU as the check itself. Meanwhile the window still counts the larger
   * bound, so a delay can only refuse early, never admit too much.
   */
  settle(ticket: TokenTicket, actualTokens: number): void {
    if (ticket.local) return this.local.settle(ticket, actualTokens);
    const n = Math.max(0, Math.ceil(actualTokens));
    if (n === ticket.tokens) return;
    this.corrections.push({ ticket, n });
  }

  private sendCorrections(): void {
    if (this.corrections.length === 0) return;
    const batch = this.corrections;
    this.corrections = [];
    if (!this.up) return; // their entries expire with the window
    // One script call per API key for all of its corrections in the batch.
    const perKey = new Map<string, (string | number)[]>();
    for (const { ticket, n } of batch) {
      let args = perKey.get(ticket.keyId);
      if (!args) perKey.set(ticket.keyId, (args = []));
      args.push(`${ticket.id}:${ticket.tokens}`, ticket.id, n, ticket.tokens);
    }
    for (const [keyId, args] of perKey) {
      const [, tk, sk] = this.keys(keyId);
      for (let i = 0; i < args.length; i += 4000) this.redis.rlSettle(tk, sk, ...args.slice(i, i + 4000)).catch(() => undefined);
    }
  }

  async usage(keyIds: string[]): Promise<Map<string, WindowUsage>> {
    if (!this.up) return this.local.usage(keyIds);
    try {
      const rows = await Promise.all(keyIds.map((k) => {
        const [rk, tk] = this.keys(k);
        return this.redis.rlUsage(rk, tk, WINDOW_MS);
      }));
      return new Map(keyIds.map((k, i) => [k, { requests: rows[i][0], tokens: rows[i][1] }]));
    } catch {
      return this.local.usage(keyIds);
    }
  }

  async close(): Promise<void> {
    clearInterval(this.correctionTimer);
    this.sendCorrections();
    await this.local.close();
    this.redis.disconnect();
  }
}
