import type { Client as TemporalClient } from '@temporalio/client';
import type { Config } from '../config';
import type { Db } from '../db';
import type { Catalog } from '../catalog';
import type { PriceBook } from '../billing';
import type { KeyResolver } from '../auth';
import type { Logger, Metrics } from '../observability';
import type { Storage } from '../storage';
import type { CreditManager, ModelCallDeps } from '../modelCall';
import type { RateLimiter } from '../limits';
import type { ResponseCache } from '../cache';

/** Everything a router may need, built once at start-up (src/server.ts, src/main.ts, tests). */
export interface AppDeps {
  config: Config;
  db: Db;
  catalog: Catalog;
  /** The price versions in force and scheduled (absent: the catalog file's prices, unversioned). */
  prices?: PriceBook;
  keys: KeyResolver;
  /** The organizations' admin keys (src/organizations: /v1/organization/*; refused on model routes). */
  adminKeys: {
    resolve(
      key: string,
    ): Promise<{ accountId: string; adminKeyId: string; role: 'owner' | 'reader'; ownerUserId: string | null } | null>;
  };
  credit: CreditManager;
  /** Per-key requests and tokens per minute: in Redis with REDIS_URL, else in this process. */
  limiter: RateLimiter;
  logger: Logger;
  metrics: Metrics;
  storage: Storage;
  /** Upstream adapters, one pooled client per catalog provider. */
  providers: ModelCallDeps['providers'];
  /** Deployment selection, retries, fallbacks and cooldowns, with the in-process health of every deployment. */
  router: ModelCallDeps['router'];
  /** Null when the API runs without Temporal (video routes then answer 503). */
  temporal: TemporalClient | null;
  /** The exact response cache (src/cache/): Redis with REDIS_URL, else Postgres; null or absent: off. */
  cache?: ResponseCache | null;
}
