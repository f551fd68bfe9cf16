import path from 'node:path';
import { format } from 'node:util';
import { Client, Connection, type ClientInterceptors } from '@temporalio/client';
import {
  bundleWorkflowCode,
  DefaultLogger,
  NativeConnection,
  Runtime,
  Worker,
  type InjectedSinks,
  type LogEntry,
  type LogLevel,
  type WorkerInterceptors,
  type WorkflowBundleWithSourceMap,
} from '@temporalio/worker';
import { loadConfig, type Config } from './config';
import { createPool } from './db/pool';
import { ensureDatabase, migrate } from './db/migrate';
import { Catalog } from './catalog/catalog';
import { PriceBook } from './billing/priceBook';
import { createReconcileActivities } from '../activities/reconcile';
import { ensureReconcileSchedules } from './reconcile/schedule';
import { createStorage } from './storage';
import { createLogger, redirectedLines } from './observability/logger';
import { releaseExpiredHolds } from './billing/ledger';
import { VideoProviders } from './providers/video';
import { reconcileVideoJobs } from './video/reconciler';
import { reconcileBatches } from './batches/reconciler';
import {
  createBatchActivities,
  createBatchNativeActivities,
  createVideoActivities,
  createWebhookActivities,
} from '../activities';
import { ProviderRegistry } from './providers/registry';
import { AnthropicAdapter } from './providers/anthropic';
import { GeminiAdapter } from './providers/gemini';
import { ModelRouter } from './routing/modelRouter';
import { serveWorkerMetrics } from './observability/metricsServer';
import { flushTracing, initTracing, tracer } from './observability/tracing';

/**
 * Production worker entry point (`npm run worker`; src/main.ts runs it in-process): the Temporal worker for the
 * video workflow and the webhook delivery workflow with their activities, plus two periodic repairs: the video
 * reconciler (no job without a hold, no hold without a job) and the release of expired holds (credit leases of API
 * processes that died). Its video
 * submissions are routed across deployments by a router of its own, whose counters it serves on GET /metrics
 * (WORKER_METRICS_PORT).
 */

export interface WorkerHandle {
  /** The worker's own metrics endpoint; null when disabled or when it shares the API's router (npm start). */
  metricsUrl: string | null;
  close(): Promise<void>;
}

export interface WorkerOptions {
  reconciler?: boolean;
  /**
   * The API's router, when the worker runs in the API's process (npm start): video submissions then count on the
   * API's router, so they appear on the API's /metrics, and the worker serves no metrics of its own.
   */
  router?: ModelRouter;
}

// Bundling the workflow code (webpack) takes seconds: do it once per process (and set of interceptor modules).
const bundles = new Map<string, Promise<WorkflowBundleWithSourceMap>>();
function workflowBundle(
  workflowsPath: string,
  workflowInterceptorModules: string[],
): Promise<WorkflowBundleWithSourceMap> {
  const key = [workflowsPath, ...workflowInterceptorModules].join('\n');
  let b = bundles.get(key);
  if (!b) {
    b = bundleWorkflowCode({ workflowsPath, workflowInterceptorModules, logger: quietBundlerLogger });
    b.catch(() => bundles.delete(key));
    bundles.set(key, b);
  }
  return b;
}
const noop = () => undefined;
const quietBundlerLogger = {
  trace: noop,
  debug: noop,
  info: noop,
  warn: noop,
  error: (m: string) => console.error(m),
  log: noop,
};

/** The Temporal core runtime logs at the configured level (installed once per process, before any connection). */
export function installRuntime(level: string): void {
  if (Runtime._instance) return;
  const map: Record<string, LogLevel> = {
    trace: 'TRACE',
    debug: 'DEBUG',
    info: 'INFO',
    warn: 'WARN',
    error: 'ERROR',
    fatal: 'ERROR',
    silent: 'ERROR',
  };
  try {
    const redirect = redirectedLines();
    const toRedirect = redirect
      ? (e: LogEntry) => {
          const at = new Date(Number(e.timestampNanos / 1_000_000n)).toISOString();
          redirect(`${at} [${e.level}] ${e.message}${e.meta ? ` ${format(e.meta)}` : ''}\n`);
        }
      : undefined;
    // Redirected, the native core's own lines are forwarded through the same logger instead of printed.
    Runtime.install({
      logger: new DefaultLogger(map[level] ?? 'INFO', toRedirect),
      ...(redirect ? { telemetryOptions: { logging: { forward: {} } } } : {}),
    });
  } catch {
    // Another part of the process created the runtime first: keep its logger.
  }
}

/** Runs `fn` every `ms`, never two at once; errors are logged, never thrown. */
function every(ms: number, fn: () => Promise<unknown>, onError: (e: unknown) => void): () => Promise<void> {
  let running: Promise<unknown> | null = null;
  const timer = setInterval(() => {
    if (running) return;
    running = fn()
      .catch(onError)
      .finally(() => {
        running = null;
      });
  }, ms);
  timer.unref();
  return async () => {
    clearInterval(timer);
    await running;
  };
}

export async function startWorker(config: Config = loadConfig(), opts: WorkerOptions = {}): Promise<WorkerHandle> {
  const logger = createLogger(config.logLevel, 'worker');
  installRuntime(config.logLevel);
  await initTracing('model-gateway-worker', process.env, { asyncContext: true });
  // While tracing is on: the workflow and activity interceptors continue the trace of the request that started
  // the workflow, and the workflow's spans leave its sandbox through the exporter sink.
  const traced = tracer ? await tracer.temporalWorkerOptions() : null;
  const clientInterceptors = tracer ? await tracer.temporalClientInterceptors() : null;
  await ensureDatabase(config.databaseUrl);
  await migrate(config.databaseUrl);
  const db = createPool(config.databaseUrl, 10);
  const catalog = Catalog.load(config.catalogPath);
  // Batch work is billed at the versions in force, as the API's requests.
  const prices = new PriceBook(db, catalog, {
    refreshMs: config.priceRefreshMs,
    onError: (e) => logger.warn({ err: (e as Error).message }, 'price book refresh failed'),
  });
  await prices.start();
  const storage = createStorage(config);
  const providers = new VideoProviders(catalog);
  // Batch items go through the same adapters as the API's synchronous routes.
  const syncProviders = new ProviderRegistry(catalog, {
    factories: { anthropic: (cfg) => new AnthropicAdapter(cfg), gemini: (cfg) => new GeminiAdapter(cfg) },
  });
  const cleanup: (() => Promise<unknown>)[] = [
    () => providers.close(),
    () => syncProviders.close(),
    async () => prices.stop(),
    () => db.end(),
  ];
  const router = opts.router ?? new ModelRouter(catalog, config.routing);
  try {
    const metrics =
      opts.router || config.workerMetricsPort === null
        ? null
        : await serveWorkerMetrics(router, config.workerMetricsPort, config.host);
    if (metrics) cleanup.push(() => metrics.close());
    const workflowsPath = path.join(__dirname, '..', 'workflows', 'index' + path.extname(__filename));
    const [bundle, nativeConnection, connection] = await Promise.all([
      workflowBundle(workflowsPath, traced?.interceptors.workflowModules ?? []),
      NativeConnection.connect({ address: config.temporalAddress }),
      Connection.connect({ address: config.temporalAddress }),
    ]);
    cleanup.unshift(
      () => nativeConnection.close(),
      () => connection.close(),
    );
    const temporal = new Client({
      connection,
      namespace: config.temporalNamespace,
      ...(clientInterceptors ? { interceptors: clientInterceptors as ClientInterceptors } : {}),
    });
    const batchDeps = {
      db,
      storage,
      catalog,
      providers: syncProviders,
      router,
      settings: config.batches,
      logger,
    };
    const worker = await Worker.create({
      connection: nativeConnection,
      namespace: config.temporalNamespace,
      taskQueue: config.temporalTaskQueue,
      workflowBundle: bundle,
      activities: {
        ...createVideoActivities({ db, storage, catalog, providers, router, logger }),
        ...createBatchActivities(batchDeps),
        ...createBatchNativeActivities(batchDeps),
        ...createReconcileActivities({ db, catalog, logger }),
        ...createWebhookActivities({
          db,
          temporal,
          taskQueue: config.temporalTaskQueue,
          settings: config.webhooks,
          logger,
        }),
      },
      stickyQueueScheduleToStartTimeout: config.video.stickyQueueTimeoutMs,
      maxConcurrentActivityTaskExecutions: 200,
      // (The workflow interceptors are in the bundle: a worker given a bundle takes them from there.)
      ...(traced
        ? {
            interceptors: { activity: traced.interceptors.activity } as WorkerInterceptors,
            sinks: traced.sinks as InjectedSinks<never>,
          }
        : {}),
    });
    // Daily reconciliation of each provider with a usage report (RECONCILE_SCHEDULE=false: none).
    if (config.reconcileSchedule)
      await ensureReconcileSchedules(temporal, catalog, config.temporalTaskQueue).catch((e) =>
        logger.warn({ err: (e as Error).message }, 'could not create the reconciliation schedules'),
      );
    const running = worker.run();
    running.catch((e) => logger.error({ err: (e as Error).message }, 'video worker stopped'));

    const stops: (() => Promise<void>)[] = [];
    if (opts.reconciler !== false) {
      const onError = (what: string) => (e: unknown) => logger.warn({ err: (e as Error)?.message }, `${what} failed`);
      stops.push(
        every(
          config.video.reconcileIntervalMs,
          () => reconcileVideoJobs({ db, temporal, config, logger }),
          onError('video reconciler'),
        ),
      );
      stops.push(
        every(
          config.video.reconcileIntervalMs,
          () => reconcileBatches({ db, temporal, config, logger }),
          onError('batch reconciler'),
        ),
      );
      stops.push(every(config.video.holdSweepIntervalMs, () => releaseExpiredHolds(db), onError('expired hold sweep')));
    }
    logger.info(
      { taskQueue: config.temporalTaskQueue, temporal: config.temporalAddress, metrics: metrics?.url },
      'video worker running',
    );

    let closed: Promise<void> | null = null;
    return {
      metricsUrl: metrics?.url ?? null,
      close() {
        closed ??= (async () => {
          await Promise.all(stops.map((s) => s()));
          if (worker.getState() === 'RUNNING') worker.shutdown();
          await running.catch(() => undefined);
          for (const c of cleanup) await c().catch(() => undefined);
          await flushTracing();
        })();
        return closed;
      },
    };
  } catch (e) {
    for (const c of cleanup) await c().catch(() => undefined);
    throw e;
  }
}

if (require.main === module) {
  startWorker().then(
    (w) => {
      const stop = () => {
        w.close().then(
          () => process.exit(0),
          () => process.exit(1),
        );
      };
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    },
    (e) => {
      console.error(`worker failed to start: ${e instanceof Error ? e.message : String(e)}`);
      process.exit(1);
    },
  );
}
