import { RedisRateLimiter } from '../../../src/limits/redisRateLimiter';
import { freePort } from '../../support/http';

/**
 * With REDIS_URL set and Redis unreachable (nothing listens on its port), the limiter keeps limiting, per process:
 * each request is decided by the in-process window, counted as such, and the outage is reported once.
 */

test('Redis unreachable: decided in-process, limits still hold, the outage reported once', async () => {
  const statuses: boolean[] = [];
  const errors: string[] = [];
  let local = 0;
  const limiter = new RedisRateLimiter({
    url: `redis://127.0.0.1:${await freePort()}`,
    prefix: 'unit:',
    timeoutMs: 100,
    logger: { error: (...a: unknown[]) => errors.push(String(a.at(-1))), info: () => undefined } as never,
    onStatus: (up) => statuses.push(up),
    onLocalDecision: () => local++,
  });
  try {
    expect(limiter.mode).toBe('memory (redis unreachable)');
    const limits = { rpm: 2, tpm: null };
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push(await limiter.check('k', limits, 0));
    expect(answers.map((a) => a.allowed)).toEqual([true, true, false]);
    expect(answers[2]).toMatchObject({ refused: 'requests', requests: { limit: 2, remaining: 0 } });
    expect(local).toBe(3);
    expect(statuses).toEqual([false]);
    // The first failed connection is logged (the test's timeout bounds the wait); the retries after it are not.
    while (errors.length === 0) await new Promise((r) => setTimeout(r, 10));
    expect(await limiter.ready(300)).toBe(false); // nothing listens: never ready
    expect(errors).toEqual(['rate limiter: Redis unreachable; limiting per process until it is back']);
  } finally {
    await limiter.close();
  }
});
