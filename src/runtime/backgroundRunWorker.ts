import { NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
import type { Config } from '../config';
import type { Catalog } from '../catalog';
import { createPool } from '../db';
import type { Logger } from '../observability';
import type { ModelRouter } from '../modelCall';
import type { Storage } from '../storage';
import { buildProviderRegistry } from '../providers';
import { backgroundRunTaskQueue } from '../backgroundResponses/settings';
import { createBackgroundActivities } from '../../activities/backgroundResponse';
import { ownWorker, type OwnWorker } from './ownWorker';

/**
 * The worker of background responses' upstream calls, beside the jobs' worker in the same process: a task queue of
 * its own (backgroundRunTaskQueue), its own activity slots and upstream sockets (BACKGROUND_CONCURRENCY, default
 * 1,000) and its own database connections (BACKGROUND_DB_CONNECTIONS). A run is an upstream stream that lasts
 * minutes and holds a database connection only while it stores a batch of events, so a thousand cost little
 * (docs/benchmarks.md, "Background responses in flight"); on the jobs' queue they would take the 200 slots that
 * batches and video jobs share, and be bounded by them. Activities only: the workflow stays on the jobs' queue.
 */

export type BackgroundRunWorker = OwnWorker;

export async function createBackgroundRunWorker(o: {
  config: Config;
  connection: NativeConnection;
  catalog: Catalog;
  storage: Storage;
  router: ModelRouter;
  logger: Logger;
  /** The activity interceptors of the jobs' worker, when tracing is on. */
  interceptors?: WorkerOptions['interceptors'];
}): Promise<BackgroundRunWorker> {
  const { config } = o;
  const { concurrency, dbConnections } = config.backgroundResponses;
  const db = createPool(config.databaseUrl, dbConnections);
  // A socket per open stream: as many to each upstream origin as runs at once.
  const providers = buildProviderRegistry(o.catalog, { connections: concurrency });
  return ownWorker(async () => {
    const { runBackgroundResponse } = createBackgroundActivities({
      config,
      db,
      catalog: o.catalog,
      storage: o.storage,
      router: o.router,
      providers,
      logger: o.logger,
    });
    return Worker.create({
      connection: o.connection,
      namespace: config.temporalNamespace,
      taskQueue: backgroundRunTaskQueue(config),
      activities: { runBackgroundResponse },
      maxConcurrentActivityTaskExecutions: concurrency,
      // Heartbeats reach Temporal every third of the heartbeat timeout (the SDK's default, 80% of it, leaves a
      // loaded server or event loop a few seconds before it gives an attempt up as lost and starts another).
      maxHeartbeatThrottleInterval: Math.max(1_000, Math.floor(config.backgroundResponses.heartbeatMs / 3)),
      // A deploy lets the runs in flight finish (billed once) rather than cut them short (retried elsewhere, the
      // provider paid twice); those still going when the grace ends fail as lost and are retried. Heartbeats go on
      // meanwhile; the worker takes no new run.
      shutdownGraceTime: config.backgroundResponses.shutdownGraceMs,
      ...(o.interceptors ? { interceptors: o.interceptors } : {}),
    });
  }, [() => providers.close(), () => db.end()]);
}
