import { NativeConnection, Worker, type WorkerOptions, type WorkflowBundleOption } from '@temporalio/worker';
import type { Client } from '@temporalio/client';
import type { Config } from '../config';
import { createPool } from '../db';
import type { Logger } from '../observability';
import { deliveryLimits, webhookTaskQueue } from '../jobs/webhooks';
import { createWebhookActivities } from '../../activities';
import { ownWorker, type OwnWorker } from './ownWorker';

/**
 * The worker of webhook deliveries, beside the jobs' worker in the same process: a task queue of its own
 * (webhookTaskQueue), its own activity slots (WEBHOOK_CONCURRENCY) and its own database connections, so receivers
 * that never answer hold delivery slots only, never the slots, connections or queue of batches and video jobs.
 * Within it each account has at most WEBHOOK_ACCOUNT_CONCURRENCY tries in flight (src/jobs/webhooks/activities.ts).
 */

export type DeliveryWorker = OwnWorker;

export async function createDeliveryWorker(o: {
  config: Config;
  connection: NativeConnection;
  bundle: WorkflowBundleOption;
  temporal: Client;
  logger: Logger;
  /** The tracing interceptors and sinks of the jobs' worker, when tracing is on. */
  traced?: Pick<WorkerOptions, 'interceptors' | 'sinks'>;
}): Promise<DeliveryWorker> {
  const { config } = o;
  const limits = deliveryLimits(config.webhooks);
  // A few connections suffice: a try holds one only for its short reads and writes, never during the POST.
  const db = createPool(config.databaseUrl, 5);
  return ownWorker(async () => {
    const { attemptWebhookDelivery } = createWebhookActivities({
      db,
      temporal: o.temporal,
      taskQueue: webhookTaskQueue(config),
      settings: config.webhooks,
      logger: o.logger,
    });
    return Worker.create({
      connection: o.connection,
      namespace: config.temporalNamespace,
      taskQueue: webhookTaskQueue(config),
      workflowBundle: o.bundle,
      activities: { attemptWebhookDelivery },
      maxConcurrentActivityTaskExecutions: limits.concurrency,
      maxConcurrentWorkflowTaskExecutions: config.jobs.workflowConcurrency,
      maxCachedWorkflows: config.jobs.workflowCache, // as the jobs' worker: tasks wait where accounts take turns
      stickyQueueScheduleToStartTimeout: config.video.stickyQueueTimeoutMs,
      // A deploy lets the tries in flight end and be recorded (a POST ends by WEBHOOK_TIMEOUT_MS, within the grace),
      // in the same grace as the jobs' worker (JOBS_SHUTDOWN_GRACE_MS).
      shutdownGraceTime: config.jobs.shutdownGraceMs,
      ...o.traced,
    });
  }, [() => db.end()]);
}
