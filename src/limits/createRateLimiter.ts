import type { Config } from '../config';
import type { Logger, Metrics } from '../observability';
import { MemoryRateLimiter, type RateLimiter } from './rateLimiter';
import type { RedisRateLimiter as RedisLimiter } from './redisRateLimiter';

/** REDIS_URL set: the limiter shared by all API processes; unset (one process, `npm start`): in-process. */
export function createRateLimiter(config: Config, logger: Logger, metrics: Metrics): RateLimiter {
  if (!config.redisUrl) return new MemoryRateLimiter();
  // Loaded only when configured: ioredis adds ~5 MB of resident memory to a process that never uses it.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { RedisRateLimiter } = require('./redisRateLimiter') as { RedisRateLimiter: typeof RedisLimiter };
  return new RedisRateLimiter({
    url: config.redisUrl,
    prefix: config.redisKeyPrefix,
    timeoutMs: config.rateLimitRedisTimeoutMs,
    logger,
    onStatus: (up) => metrics.rateLimitRedisUp.set(up ? 1 : 0),
    onLocalDecision: () => metrics.rateLimitLocalDecisions.inc(),
    onSliceRefusal: () => metrics.rateLimitSliceRefusals.inc(),
  });
}
