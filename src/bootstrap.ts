import type { Client, ClientInterceptors, Connection } from '@temporalio/client';
import { flushTracing, initTracing, tracer } from './observability/tracing';
import type { AppDeps } from './api/deps';
import { loadConfig, type Config } from './config';
import { createPool } from './db/pool';
import { ensureDatabase, migrate } from './db/migrate';
import { Catalog } from './catalog/catalog';
import { PriceBook } from './billing/priceBook';
import { registerReconcileMetrics } from './reconcile/metrics';
import { KeyResolver } from './auth/apiKeys';
import { CreditManager } from './billing/credit';
import { createLogger } from './observability/logger';
import { Metrics } from './observability/metrics';
import { createStorage } from './storage';
import { ProviderRegistry } from './providers/registry';
import { ModelRouter } from './routing/modelRouter';
import { AnthropicAdapter } from './providers/anthropic';
import { GeminiAdapter } from './providers/gemini';
import { BedrockAdapter } from './providers/bedrock';
import { VertexAdapter } from './providers/vertex';
import { createRateLimiter } from './limits/createRateLimiter';

/** Builds the API's dependencies from config: database (created and migrated), catalog, Temporal client. */
export async function buildDeps(
  config: Config = loadConfig(),
  opts: { temporal?: boolean } = {},
): Promise<AppDeps & { close(): Promise<void> }> {
  const logger = createLogger(config.logLevel);
  await initTracing('model-gateway');
  await ensureDatabase(config.databaseUrl);
  await migrate(config.databaseUrl);
  const db = createPool(config.databaseUrl, 20);
  const catalog = Catalog.load(config.catalogPath);
  // Before anything prices a request: the versions in force on the catalog's models.
  const prices = new PriceBook(db, catalog, {
    refreshMs: config.priceRefreshMs,
    onError: (e) => logger.warn({ err: (e as Error).message }, 'price book refresh failed'),
  });
  await prices.start();
  const metrics = new Metrics();
  registerReconcileMetrics(metrics.registry, db);
  const credit = new CreditManager(db, {
    leaseVnd: config.creditLeaseVnd,
    flushMs: config.creditFlushMs,
    logger,
    onCharged: (operation, model, vnd) => metrics.observeCharge(operation, model, vnd),
    onUncollected: (operation, model, vnd) => metrics.uncollectedVnd.inc({ operation, model }, vnd),
  });
  const limiter = createRateLimiter(config, logger, metrics);
  const onError = (provider: string, status: number) =>
    metrics.upstreamErrors.inc({ provider, status: String(status) });
  const providers = new ProviderRegistry(catalog, {
    onError,
    factories: {
      anthropic: (cfg) => new AnthropicAdapter(cfg, { onError }),
      gemini: (cfg) => new GeminiAdapter(cfg, { onError }),
      bedrock: (cfg) => new BedrockAdapter(cfg, { onError }),
      vertex: (cfg) => new VertexAdapter(cfg, { onError }),
    },
  });
  const router = new ModelRouter(catalog, config.routing);
  metrics.observeRouting(router);
  let temporal: Client | null = null;
  let connection: Connection | null = null;
  // TEMPORAL_ADDRESS=off: an API process for the synchronous operations only (video routes answer 503).
  if (opts.temporal !== false && config.temporalAddress !== 'off') {
    // Loaded here, not at the top: an API process without Temporal never loads its gRPC stack.
    const { Client, Connection } = await import('@temporalio/client');
    connection = await Connection.connect({ address: config.temporalAddress });
    // While tracing is on, a workflow started here continues the request's trace (src/observability/tracing.ts).
    const interceptors = tracer ? await tracer.temporalClientInterceptors() : undefined;
    temporal = new Client({
      connection,
      namespace: config.temporalNamespace,
      ...(interceptors ? { interceptors: interceptors as ClientInterceptors } : {}),
    });
  }
  return {
    config,
    db,
    catalog,
    prices,
    logger,
    metrics,
    credit,
    limiter,
    temporal,
    providers,
    router,
    keys: new KeyResolver(db, config.keyCacheMs),
    storage: createStorage(config),
    async close() {
      prices.stop();
      await credit.close();
      await flushTracing();
      await limiter.close();
      await providers.close();
      await connection?.close();
      await db.end();
    },
  };
}
