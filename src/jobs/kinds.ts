import type { Client } from '@temporalio/client';
import type { Config } from '../config';
import type { Db } from '../db';
import type { Storage } from '../storage';
import type { Catalog } from '../catalog';
import type { Logger } from '../observability';
import type { ProviderRegistry } from '../providers';
import type { VideoProviders } from '../providers';
import type { ModelRouter } from '../modelCall';
import type { PeriodicTask } from './periodic';
import {
  createBackgroundActivities,
  createBatchActivities,
  createBatchNativeActivities,
  createBatchSlotActivities,
  createReconcileActivities,
  createTopupActivities,
  createVideoActivities,
  createWebhookActivities,
} from '../../activities';
import { followTwins, reconcileVideoJobs, VIDEO_WORKFLOW_TYPE } from './video';
import { BATCH_WORKFLOW_TYPE, reconcileBatches } from './batches';
import {
  DELIVERY_WORKFLOW_TYPE,
  reconcileDeliveries,
  startDelivery,
  webhookTaskQueue,
  type DeliveryReconcileCursor,
} from './webhooks';
import { BACKGROUND_WORKFLOW_TYPE, backgroundRunTaskQueue, reconcileBackgroundResponses } from './backgroundResponses';
import { ensureReconcileSchedules, RECONCILE_WORKFLOW_TYPE } from './reconcile';
import {
  ensureStatementSchedule,
  reconcileTopups,
  sweepLowBalances,
  TOPUP_STATEMENT_WORKFLOW_TYPE,
  TOPUP_WORKFLOW_TYPE,
} from './topups';

/**
 * The job kinds, one row each (docs/architecture.md, "The job engine"; "Adding a job kind"): what src/worker.ts
 * registers (the activities on the jobs' task queue), which task queues the kinds' workflows and activities run on,
 * the upkeep it runs (each kind's reconciler and sweeps) and the Temporal schedules it keeps. Everything else of a
 * kind is in its folder, src/jobs/<name>/, entered through its index.ts; its workflows are exported by
 * workflows/index.ts and its activity factories by activities/index.ts, the worker's entry points.
 * test/unit/jobs/kinds.test.ts checks the rows against the files, the walk (bench/walk.ts) and the docs.
 */

/** What the worker hands a kind's activities, upkeep and schedules. */
export interface KindDeps {
  config: Config;
  db: Db;
  storage: Storage;
  catalog: Catalog;
  /** The synchronous routes' adapters (batch items and background responses go through them). */
  providers: ProviderRegistry;
  videoProviders: VideoProviders;
  router: ModelRouter;
  temporal: Client;
  logger: Logger;
}

export interface JobKind {
  /** Its folder, src/jobs/<name>/. */
  name: string;
  /**
   * Its workflow types, each exported under this name by workflows/index.ts. Recorded histories name them: a type
   * is never renamed (test/integration/workflow-replay.test.ts replays histories of earlier builds).
   */
  workflowTypes: readonly string[];
  /** The task queue its workflows are started on. */
  taskQueue(config: Config): string;
  /**
   * A task queue its activities have to themselves, served by a worker of its own beside the jobs' worker
   * (src/runtime/: its slots, connections and sockets), when it has one.
   */
  ownQueue?(config: Config): string;
  /** Its activities, registered on the jobs' task queue (TEMPORAL_TASK_QUEUE). */
  activities(deps: KindDeps): object;
  /** Its reconciler (no hold outlives its job, no job without its workflow) and sweeps, run by the worker. */
  upkeep(deps: KindDeps): PeriodicTask[];
  /** The Temporal schedules it keeps, created at the worker's start. */
  schedules?(deps: KindDeps): Promise<void>;
  /** Its settings in Config (read by its folder's settings.ts), or null when it has none of its own. */
  settings: keyof Config | null;
}

const jobsQueue = (config: Config) => config.temporalTaskQueue;
/** Every reconciler runs this often (VIDEO_RECONCILE_INTERVAL_MS, the first kind's setting, kept for all). */
const repairEvery = (config: Config) => config.video.reconcileIntervalMs;
const batchDeps = (d: KindDeps) => ({
  db: d.db,
  storage: d.storage,
  catalog: d.catalog,
  providers: d.providers,
  router: d.router,
  settings: d.config.batches,
  logger: d.logger,
});

export const JOB_KINDS: readonly JobKind[] = [
  {
    name: 'video',
    workflowTypes: [VIDEO_WORKFLOW_TYPE],
    taskQueue: jobsQueue,
    activities: (d) =>
      createVideoActivities({
        db: d.db,
        storage: d.storage,
        catalog: d.catalog,
        providers: d.videoProviders,
        router: d.router,
        logger: d.logger,
      }),
    upkeep: (d) => [
      {
        name: 'video reconciler',
        everyMs: repairEvery(d.config),
        run: () => reconcileVideoJobs({ db: d.db, temporal: d.temporal, config: d.config, logger: d.logger }),
      },
      {
        // Duplicate video tasks that could not be cancelled, followed to their end (read from the database).
        name: 'duplicate video task sweep',
        everyMs: d.config.video.twinSweepIntervalMs,
        run: () =>
          followTwins(
            { db: d.db, catalog: d.catalog, providers: d.videoProviders, router: d.router, logger: d.logger },
            { followWindowMs: d.config.video.followWindowMs },
          ),
      },
    ],
    settings: 'video',
  },
  {
    name: 'batches',
    workflowTypes: [BATCH_WORKFLOW_TYPE],
    taskQueue: jobsQueue,
    activities: (d) => ({
      ...createBatchActivities(batchDeps(d)),
      ...createBatchNativeActivities(batchDeps(d)),
      ...createBatchSlotActivities(batchDeps(d)),
    }),
    upkeep: (d) => [
      {
        name: 'batch reconciler',
        everyMs: repairEvery(d.config),
        run: () =>
          reconcileBatches({ db: d.db, temporal: d.temporal, config: d.config, storage: d.storage, logger: d.logger }),
      },
    ],
    settings: 'batches',
  },
  {
    name: 'webhooks',
    workflowTypes: [DELIVERY_WORKFLOW_TYPE],
    // Deliveries run on a queue of their own (src/runtime/webhookDeliveryWorker.ts), so receivers that never answer
    // cannot hold the jobs' slots.
    taskQueue: webhookTaskQueue,
    ownQueue: webhookTaskQueue,
    // Emitting starts deliveries on their own queue; the try activity stays registered on the jobs' queue for
    // delivery workflows started there before it had one.
    activities: (d) =>
      createWebhookActivities({
        db: d.db,
        temporal: d.temporal,
        taskQueue: webhookTaskQueue(d.config),
        settings: d.config.webhooks,
        logger: d.logger,
      }),
    upkeep: (d) => {
      // Each run goes on where the last one stopped.
      const cursor: DeliveryReconcileCursor = {};
      return [
        {
          name: 'delivery reconciler',
          everyMs: repairEvery(d.config),
          run: () =>
            reconcileDeliveries(
              {
                db: d.db,
                temporal: d.temporal,
                taskQueue: webhookTaskQueue(d.config),
                settings: d.config.webhooks,
                logger: d.logger,
              },
              // Past a try's own limit, so a try in flight is never taken for a lost one.
              { graceMs: Math.max(d.config.video.reconcileGraceMs, d.config.webhooks.timeoutMs + 20_000), cursor },
            ),
        },
      ];
    },
    settings: 'webhooks',
  },
  {
    name: 'backgroundResponses',
    workflowTypes: [BACKGROUND_WORKFLOW_TYPE],
    taskQueue: jobsQueue,
    // The upstream calls: a queue of their own (src/runtime/backgroundRunWorker.ts); the workflow stays here.
    ownQueue: backgroundRunTaskQueue,
    // The runs of background responses started before they had a queue of their own end on the jobs' queue.
    activities: (d) => createBackgroundActivities({ ...batchDeps(d), config: d.config }),
    upkeep: (d) => [
      {
        name: 'background response reconciler',
        everyMs: repairEvery(d.config),
        run: () =>
          reconcileBackgroundResponses({
            db: d.db,
            temporal: d.temporal,
            config: d.config,
            catalog: d.catalog,
            logger: d.logger,
          }),
      },
    ],
    settings: 'backgroundResponses',
  },
  {
    name: 'reconcile',
    workflowTypes: [RECONCILE_WORKFLOW_TYPE],
    taskQueue: jobsQueue,
    activities: (d) => createReconcileActivities({ db: d.db, catalog: d.catalog, logger: d.logger }),
    // No reconciler: the schedule runs a day again.
    upkeep: () => [],
    // Daily reconciliation of each provider with a usage report (RECONCILE_SCHEDULE=false: none).
    schedules: async (d) => {
      if (d.config.reconcileSchedule) await ensureReconcileSchedules(d.temporal, d.catalog, jobsQueue(d.config));
    },
    settings: null,
  },
  {
    name: 'topups',
    workflowTypes: [TOPUP_WORKFLOW_TYPE, TOPUP_STATEMENT_WORKFLOW_TYPE],
    taskQueue: jobsQueue,
    activities: (d) => createTopupActivities({ db: d.db, temporal: d.temporal, config: d.config, logger: d.logger }),
    upkeep: (d) => [
      {
        name: 'top-up reconciler',
        everyMs: repairEvery(d.config),
        run: () =>
          reconcileTopups(
            { db: d.db, temporal: d.temporal, taskQueue: jobsQueue(d.config), logger: d.logger },
            { graceMs: d.config.video.reconcileGraceMs },
          ),
      },
      {
        // balance.low, once per crossing of an account's threshold (its deliveries started here, or else by the
        // delivery reconciler).
        name: 'low balance sweep',
        everyMs: repairEvery(d.config),
        run: async () => {
          for (const delivery of await sweepLowBalances(d.db))
            await startDelivery(d.temporal, webhookTaskQueue(d.config), d.config.webhooks, delivery);
        },
      },
    ],
    // The daily statement, when a bank feed's transaction list is configured (TOPUP_STATEMENT_SCHEDULE).
    schedules: async (d) => {
      if (d.config.topups.statementSchedule && d.config.topups.sepayApiUrl)
        await ensureStatementSchedule(d.temporal, jobsQueue(d.config));
    },
    settings: 'topups',
  },
];
