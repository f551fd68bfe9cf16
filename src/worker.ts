import { sweepFileBytes } from './files';
import { runPeriodic, type PeriodicTask } from './jobs';
import path from 'node:path';
import { format } from 'node:util';
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
  type WorkflowBundleOption,
  type WorkflowBundleWithSourceMap,
} from '@temporalio/worker';
import { loadConfig, type Config } from './config';
import { redirectedLines, serveWorkerMetrics, flushTracing, tracer } from './observability';
import { buildCore } from './bootstrap';
import { type ModelRouter, recoverDeadLeases, staleAfter } from './modelCall';
import { releaseExpiredHolds } from './billing';
import { exitOnStopSignals } from './runtime/stopSignals';
import { VideoProviders } from './providers';
import { JOB_KINDS, type KindDeps } from './jobs/kinds';
import { startDelivery, webhookTaskQueue } from './jobs/webhooks';
import { mailSpendAlerts, smtpMailer, sweepSpendAlerts } from './organizations';
import { createDeliveryWorker } from './runtime/webhookDeliveryWorker';
import { createBackgroundRunWorker } from './runtime/backgroundRunWorker';

/**
 * Production worker entry point (`npm run worker`; src/main.ts runs it in-process): the Temporal worker of the job
 * kinds (src/jobs/kinds.ts, one row each: their activities on the jobs' task queue, their reconcilers and sweeps, their
 * schedules), the workers of the kinds' own queues (webhook deliveries, background responses' upstream calls), and
 * the upkeep that is no kind's: the release of expired holds, the bytes of deleted files, spend alerts and the
 * recovery of the credit leases of API processes that died (billing/creditHolders.ts). Its video submissions are
 * routed across deployments by a router of its own, whose counters it serves on GET /metrics (WORKER_METRICS_PORT).
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
  /** A workflow bundle built beforehand (tests start many worker processes; bundling is most of a start). */
  workflowCodePath?: string;
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

export async function startWorker(config: Config = loadConfig(), opts: WorkerOptions = {}): Promise<WorkerHandle> {
  installRuntime(config.logLevel);
  // The same composition root as the API (src/bootstrap.ts): one list of adapters, storages and settings.
  const core = await buildCore(config, { role: 'worker', ...(opts.router ? { router: opts.router } : {}) });
  const { logger, db, catalog, storage, router } = core;
  const temporal = core.temporal!;
  // Batch items go through the same adapters as the API's synchronous routes.
  const syncProviders = core.providers;
  const providers = new VideoProviders(catalog);
  const cleanup: (() => Promise<unknown>)[] = [() => providers.close(), () => core.close()];
  try {
    // While tracing is on: the workflow and activity interceptors continue the trace of the request that started
    // the workflow, and the workflow's spans leave its sandbox through the exporter sink.
    const traced = tracer ? await tracer.temporalWorkerOptions() : null;
    const metrics =
      opts.router || config.workerMetricsPort === null
        ? null
        : await serveWorkerMetrics(router, config.workerMetricsPort, config.host);
    if (metrics) cleanup.push(() => metrics.close());
    const workflowsPath = path.join(__dirname, '..', 'workflows', 'index' + path.extname(__filename));
    const [bundle, nativeConnection] = await Promise.all([
      opts.workflowCodePath && !traced
        ? Promise.resolve<WorkflowBundleOption>({ codePath: opts.workflowCodePath })
        : workflowBundle(workflowsPath, traced?.interceptors.workflowModules ?? []),
      NativeConnection.connect({ address: config.temporalAddress }),
    ]);
    cleanup.unshift(() => nativeConnection.close());
    const kindDeps: KindDeps = {
      config,
      db,
      storage,
      catalog,
      providers: syncProviders,
      videoProviders: providers,
      router,
      temporal,
      logger,
    };
    // Every kind's workflows run on the jobs' queue or on a queue of its own that a worker below serves.
    const served = new Set([
      config.temporalTaskQueue,
      ...JOB_KINDS.flatMap((k) => (k.ownQueue ? [k.ownQueue(config)] : [])),
    ]);
    for (const k of JOB_KINDS)
      if (!served.has(k.taskQueue(config))) throw new Error(`no worker serves the ${k.name} task queue`);
    const worker = await Worker.create({
      connection: nativeConnection,
      namespace: config.temporalNamespace,
      taskQueue: config.temporalTaskQueue,
      workflowBundle: bundle,
      // Every kind's activities, on the jobs' queue (a kind with a queue of its own keeps them registered here for
      // the workflows started before it had one).
      activities: Object.assign({}, ...JOB_KINDS.map((k) => k.activities(kindDeps))),
      stickyQueueScheduleToStartTimeout: config.video.stickyQueueTimeoutMs,
      maxConcurrentActivityTaskExecutions: config.jobs.concurrency,
      // Every workflow task in the queue where accounts take turns, not on this worker's sticky queue (first come,
      // first served) unless JOBS_WORKFLOW_CACHE says so: docs/architecture.md, "Fairness".
      maxCachedWorkflows: config.jobs.workflowCache,
      maxConcurrentWorkflowTaskExecutions: config.jobs.workflowConcurrency,
      // A deploy lets the activities in flight end (JOBS_SHUTDOWN_GRACE_MS) rather than cut them short: a video
      // submit cut mid-request is submitted again by the next worker (the provider paid twice), a chunk cut short
      // commits nothing. Heartbeats go on meanwhile; the worker takes no new task. Those still going when it ends
      // are cancelled (a chunk's requests already sent still end and are kept: src/jobs/batches/activities.ts).
      shutdownGraceTime: config.jobs.shutdownGraceMs,
      // (The workflow interceptors are in the bundle: a worker given a bundle takes them from there.)
      ...(traced
        ? {
            interceptors: { activity: traced.interceptors.activity } as WorkerInterceptors,
            sinks: traced.sinks as InjectedSinks<never>,
          }
        : {}),
    });
    // The kinds' Temporal schedules (reconciliation per provider, the top-ups' statement).
    for (const k of JOB_KINDS)
      await k
        .schedules?.(kindDeps)
        .catch((e) => logger.warn({ err: (e as Error).message }, `could not create the ${k.name} schedules`));
    const running = worker.run();
    running.catch((e) => logger.error({ err: (e as Error).message }, 'video worker stopped'));

    // ---- Webhook deliveries: a worker of their own (queue, slots, connections) in this process.
    const deliveries = await createDeliveryWorker({
      config,
      connection: nativeConnection,
      bundle,
      temporal,
      logger,
      ...(traced
        ? {
            traced: {
              interceptors: { activity: traced.interceptors.activity } as WorkerInterceptors,
              sinks: traced.sinks as InjectedSinks<never>,
            },
          }
        : {}),
    });
    cleanup.unshift(() => deliveries.close());
    deliveries.run().catch((e) => logger.error({ err: (e as Error).message }, 'webhook delivery worker stopped'));

    // ---- Background responses' upstream calls: a worker of their own (queue, slots, sockets, connections).
    const backgroundRuns = await createBackgroundRunWorker({
      config,
      connection: nativeConnection,
      catalog,
      storage,
      router,
      logger,
      ...(traced ? { interceptors: { activity: traced.interceptors.activity } as WorkerInterceptors } : {}),
    });
    cleanup.unshift(() => backgroundRuns.close());
    backgroundRuns
      .run()
      .catch((e) => logger.error({ err: (e as Error).message }, 'background response worker stopped'));

    const stops: (() => Promise<void>)[] = [];
    if (opts.reconciler !== false) {
      // The job engine's upkeep: each kind's reconciler (no hold outlives its job, no job without its workflow) and
      // sweeps, then the upkeep that is no kind's.
      const repairEvery = config.video.reconcileIntervalMs;
      const upkeep: PeriodicTask[] = [
        ...JOB_KINDS.flatMap((k) => k.upkeep(kindDeps)),
        {
          // spend.alert, once per crossing of an organization's or project's monthly threshold, and its mail.
          name: 'spend alert sweep',
          everyMs: repairEvery,
          run: async () => {
            for (const d of await sweepSpendAlerts(db))
              await startDelivery(temporal, webhookTaskQueue(config), config.webhooks, d);
            if (config.smtpUrl) await mailSpendAlerts(db, smtpMailer(config.smtpUrl, config.mailFrom));
          },
        },
        { name: 'expired hold sweep', everyMs: config.video.holdSweepIntervalMs, run: () => releaseExpiredHolds(db) },
        // The bytes of deleted and expired files (their rows stay).
        { name: 'file bytes sweep', everyMs: config.fileSweepIntervalMs, run: () => sweepFileBytes(db, storage) },
        {
          // The credit leases of API processes that died, within a minute (the API processes recover them too).
          name: 'credit lease recovery',
          everyMs: config.creditLivenessMs,
          run: () => recoverDeadLeases(db, staleAfter(config.creditLivenessMs)),
        },
      ];
      const onError = (name: string, e: unknown) => logger.warn({ err: (e as Error)?.message }, `${name} failed`);
      for (const task of upkeep) stops.push(runPeriodic(task, onError));
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
          // The three workers' shutdown graces (BACKGROUND_SHUTDOWN_GRACE_MS for the background runs,
          // JOBS_SHUTDOWN_GRACE_MS for the jobs and the webhook deliveries) start together, so the stop takes the
          // longest of them, not their sum; the upkeep stops meanwhile. What their activities use (the connection,
          // the pools, the router, the providers) is freed after all of them ended, in `cleanup`.
          const runsStopped = backgroundRuns.close();
          const deliveriesStopped = deliveries.close();
          if (worker.getState() === 'RUNNING') worker.shutdown();
          await Promise.all(stops.map((s) => s()));
          await running.catch(() => undefined);
          await Promise.all([runsStopped, deliveriesStopped]);
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
      exitOnStopSignals(() => w.close());
    },
    (e) => {
      console.error(`worker failed to start: ${e instanceof Error ? e.message : String(e)}`);
      process.exit(1);
    },
  );
}
