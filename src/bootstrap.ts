import type { Client, ClientInterceptors, Connection } from '@temporalio/client';
import { flushTracing, initTracing, tracer, createLogger, type Logger, Metrics } from './observability';
import type { AppDeps } from './operations';
import { loadConfig, type Config } from './config';
import { createPool, ensureDatabase, migrate } from './db';
import { Catalog } from './catalog';
import { PriceBook } from './billing';
import { registerReconcileMetrics } from './reconcile/metrics';
import { KeyResolver } from './auth';
import { AdminKeyResolver } from './organizations';
import { CreditManager, ModelRouter } from './modelCall';
import type { Db } from './db';
import type { Storage } from './storage';
import type { ProviderRegistry } from './providers';
import { createStorage } from './storage';
import { buildProviderRegistry, KINDS } from './providers';
import { createRateLimiter } from './limits';
import { createResponseCache } from './cache';

/** What every process of the gateway (API, worker, `npm start`) is built on: one list, built here only. */
export interface CoreDeps {
  config: Config;
  logger: Logger;
  db: Db;
  catalog: Catalog;
  storage: Storage;
  /**
   * The synchronous upstream adapters (one per provider, by the kinds table: providers/kinds.ts), used by the API
   * and by batch items.
   */
  providers: ProviderRegistry;
  router: ModelRouter;
  /** The price versions in force and scheduled, put on the catalog's models (billing/priceBook.ts). */
  prices: PriceBook;
  /** Null for an API process without Temporal (TEMPORAL_ADDRESS=off). */
  temporal: Client | null;
  close(): Promise<void>;
}

export interface CoreOptions {
  role: 'api' | 'worker';
  /** False: no Temporal client (an API process for the synchronous operations). */
  temporal?: boolean;
  /** A router to share (npm start: the worker's video submissions count on the API's router). */
  router?: ModelRouter;
  /** Upstream errors, counted on the process's metrics. */
  onUpstreamError?: (provider: string, status: number) => void;
}

/**
 * The composition root: database (created and migrated), catalog, storage, provider adapters, router and the
 * Temporal client, for an API process and a worker alike. Tracing starts first, so the client's interceptors see it.
 */
export async function buildCore(config: Config, opts: CoreOptions): Promise<CoreDeps> {
  const worker = opts.role === 'worker';
  const logger = createLogger(config.logLevel, worker ? 'worker' : undefined);
  // A worker's activity interceptors need the async context; an API process hands spans along instead.
  if (worker) await initTracing('model-gateway-worker', process.env, { asyncContext: true });
  else await initTracing('model-gateway');
  await ensureDatabase(config.databaseUrl);
  await migrate(config.databaseUrl);
  const db = createPool(config.databaseUrl, worker ? 10 : 20);
  const catalog = Catalog.load(config.catalogPath, KINDS);
  // Before anything prices a request: the versions in force on the catalog's models.
  const prices = new PriceBook(db, catalog, {
    refreshMs: config.priceRefreshMs,
    onError: (e) => logger.warn({ err: (e as Error).message }, 'price book refresh failed'),
  });
  await prices.start();
  const providers = buildProviderRegistry(catalog, {
    connections: config.upstreamConnections,
    ...(opts.onUpstreamError ? { onError: opts.onUpstreamError } : {}),
  });
  const router = opts.router ?? new ModelRouter(catalog, config.routing);
  let temporal: Client | null = null;
  let connection: Connection | null = null;
  try {
    if (opts.temporal !== false && config.temporalAddress !== 'off') {
      // Loaded here, not at the top: an API process without Temporal never loads its gRPC stack.
      const { Client, Connection } = await import('@temporalio/client');
      connection = await Connection.connect({ address: config.temporalAddress });
      // While tracing is on, a workflow started here continues the caller's trace (src/observability/tracing.ts).
      const interceptors = tracer ? await tracer.temporalClientInterceptors() : undefined;
      temporal = new Client({
        connection,
        namespace: config.temporalNamespace,
        ...(interceptors ? { interceptors: interceptors as ClientInterceptors } : {}),
      });
    }
  } catch (e) {
    prices.stop();
    await providers.close().catch(() => undefined);
    await db.end().catch(() => undefined);
    throw e;
  }
  return {
    config,
    logger,
    db,
    catalog,
    storage: createStorage(config),
    prices,
    providers,
    router,
    temporal,
    async close() {
      prices.stop();
      await providers.close();
      await connection?.close();
      await db.end();
    },
  };
}

/** Builds an API process's dependencies: the core, plus credit, rate limits, key resolution and metrics. */
export async function buildDeps(
  config: Config = loadConfig(),
  opts: { temporal?: boolean } = {},
): Promise<AppDeps & { close(): Promise<void> }> {
  const metrics = new Metrics();
  const core = await buildCore(config, {
    role: 'api',
    temporal: opts.temporal,
    onUpstreamError: (provider, status) => metrics.upstreamErrors.inc({ provider, status: String(status) }),
  });
  const { db, logger, router } = core;
  registerReconcileMetrics(metrics.registry, db);
  const credit = new CreditManager(db, {
    leaseVnd: config.creditLeaseVnd,
    flushMs: config.creditFlushMs,
    livenessMs: config.creditLivenessMs,
    leaseTtlMs: config.creditLeaseTtlMs,
    logger,
    onCharged: (operation, model, vnd) => metrics.observeCharge(operation, model, vnd),
    onUncollected: (operation, model, vnd) => metrics.uncollectedVnd.inc({ operation, model }, vnd),
  });
  const limiter = createRateLimiter(config, logger, metrics);
  metrics.observeRouting(router);
  const cache = createResponseCache({
    db,
    config: config.cache,
    redisUrl: config.redisUrl,
    metrics: metrics.cache,
    logger,
  });
  return {
    ...core,
    metrics,
    credit,
    limiter,
    cache,
    keys: new KeyResolver(db, config.keyCacheMs),
    adminKeys: new AdminKeyResolver(db, config.keyCacheMs),
    async close() {
      await cache?.close();
      await credit.close();
      await flushTracing();
      await limiter.close();
      await core.close();
    },
  };
}
