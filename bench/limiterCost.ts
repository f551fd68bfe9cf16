import { randomUUID } from 'node:crypto';
import { MemoryRateLimiter, type RateLimiter } from '../src/limits/rateLimiter';
import { RedisRateLimiter } from '../src/limits/redisRateLimiter';

/**
 * The rate limiter's own CPU per request, in this process: `node dist/bench/limiterCost.js [requests] [concurrency]`.
 * `concurrency` requests at a time each check a key (RPM and TPM far above the run), yield a turn of the event loop
 * (the request "runs") and settle their tokens; the same loop without a limiter is the baseline subtracted. Compared:
 * the in-process window and the Redis one (BENCH_REDIS_URL, default redis://127.0.0.1:6379) with its leased slices
 * (its client's CPU included, redis-server's not, as in ab.js). Unlike `ab.js --limits` it does not depend on what
 * else the machine runs: only this process's CPU time is counted. Five rounds each, the median printed.
 */

const N = Number(process.argv[2] ?? 100_000);
const C = Number(process.argv[3] ?? 50);
const limits = { rpm: 1_000_000_000, tpm: 1_000_000_000_000 };
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** CPU µs per request of the loop with `l` (none: the loop alone). */
async function run(l: RateLimiter | null, keyId: string): Promise<number> {
  let next = 0;
  const t0 = process.cpuUsage();
  await Promise.all(
    Array.from({ length: C }, async () => {
      while (next++ < N) {
        const a = l ? await l.check(keyId, limits, 300) : null;
        if (a && !a.allowed) throw new Error(`refused: ${a.refused}`);
        await new Promise(setImmediate);
        if (l && a?.ticket) l.settle(a.ticket, 120);
      }
    }),
  );
  const t = process.cpuUsage(t0);
  return (t.user + t.system) / N;
}

async function main(): Promise<void> {
  const memory = new MemoryRateLimiter();
  const redis = new RedisRateLimiter({
    url: process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379',
    prefix: `gw-bench:${randomUUID()}:`,
    timeoutMs: 1000,
  });
  if (!(await redis.ready())) throw new Error('Redis not reachable');
  const base: number[] = [];
  const mem: number[] = [];
  const red: number[] = [];
  for (let round = 0; round < 5; round++) {
    base.push(await run(null, ''));
    mem.push((await run(memory, randomUUID())) - base[round]);
    red.push((await run(redis, randomUUID())) - base[round]);
  }
  console.log(
    `${N} requests, ${C} at a time: limiter CPU per request (check + settle), median of 5: ` +
      `in-process ${median(mem).toFixed(2)} µs, ` +
      `Redis with leased slices ${median(red).toFixed(2)} µs; the loop alone ${median(base).toFixed(2)} µs`,
  );
  await redis.close();
  await memory.close();
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
