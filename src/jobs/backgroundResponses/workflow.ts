import {
  ActivityCancellationType,
  CancellationScope,
  condition,
  defineSignal,
  patched,
  proxyActivities,
  setHandler,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import type { WebhookActivities, EventType } from '../webhooks';
import {
  BACKGROUND_CANCEL_SIGNAL,
  type BackgroundActivities,
  type BackgroundInput,
  type BackgroundOutcome,
  type BackgroundStatus,
  type BackgroundTiming,
} from './workflowContract';
import { dbStep, jobRetry } from '../jobActivityOptions';

/**
 * One background response (POST /v1/responses with background: true; docs/background-responses.md):
 *
 *   queued       runBackgroundResponse   a slot of the runs' worker takes it (before RUN_QUEUE_PATCH:
 *                (markInProgress)        an activity of its own, when the workflow runs)  -> in_progress
 *   in_progress  runBackgroundResponse   the upstream call, its events stored as they pass;
 *                                        charge, release, status in one commit -> completed, incomplete, failed
 *   cancelled    (signal)                the run's activity is cancelled: the upstream call stops, what it delivered
 *                                        is billed, the rest released
 *   failed       endBackgroundResponse   the run's attempts ran out: released, nothing charged
 *
 * Behind patched(RUN_QUEUE_PATCH) the run goes to the task queue of the background runs' worker
 * (input.runTaskQueue: slots, upstream connections and database connections of its own,
 * src/runtime/backgroundRunWorker.ts) and marks the response in_progress itself (no markInProgress step);
 * responses started before it (no marker in their history) keep both steps as they were, on the workflow's queue.
 *
 * The final status, once committed, is announced to the account's webhooks (response.<status>). Deterministic:
 * all I/O is in ./activities.ts; the contract is ./workflowContract.ts.
 */

function activityOptions(t: BackgroundTiming) {
  const retry = jobRetry(t);
  return {
    db: dbStep(t),
    /** The upstream call heartbeats: a dead worker's attempt is retried elsewhere; a cancel waits for its bill. */
    run: {
      startToCloseTimeout: t.runTimeoutMs,
      heartbeatTimeout: t.heartbeatMs,
      retry: { ...retry, maximumAttempts: t.runAttempts },
      cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    },
  };
}

/** The run activity on the background runs' own task queue (responses started before it: the workflow's queue). */
export const RUN_QUEUE_PATCH = 'background-run-own-queue';

export const backgroundCancelSignal = defineSignal<[]>(BACKGROUND_CANCEL_SIGNAL);

export async function backgroundResponseWorkflow(input: BackgroundInput): Promise<BackgroundOutcome> {
  const o = activityOptions(input.timing);
  const db = proxyActivities<BackgroundActivities>(o.db);
  const events = proxyActivities<WebhookActivities>(o.db);
  const { responseId, accountId } = input;

  let cancelRequested = false;
  setHandler(backgroundCancelSignal, () => {
    cancelRequested = true;
  });
  const enter = (s: BackgroundStatus) => {
    if (input.statusSearchAttribute) upsertSearchAttributes({ [input.statusSearchAttribute]: [s] });
  };

  // Since RUN_QUEUE_PATCH the run goes to the background runs' own queue and marks the response in_progress
  // itself when a slot takes it (one workflow task and one activity fewer per response on the jobs' worker);
  // before it, an activity here marked it and the run went to this workflow's queue.
  const ownQueue = input.runTaskQueue && patched(RUN_QUEUE_PATCH) ? input.runTaskQueue : undefined;
  const run = proxyActivities<BackgroundActivities>(ownQueue ? { ...o.run, taskQueue: ownQueue } : o.run);
  const final = ownQueue ? false : (await db.markInProgress({ responseId })).final;
  let failure = 'The response could not be run.';
  if (!final && !cancelRequested) {
    enter('in_progress');
    try {
      await CancellationScope.cancellable(async () => {
        const running = run.runBackgroundResponse({ responseId });
        await Promise.race([running, condition(() => cancelRequested)]);
        if (cancelRequested) CancellationScope.current().cancel();
        await running;
      });
    } catch (e) {
      failure = `The response could not be run: ${(e as Error).message}`.slice(0, 1000);
    }
  }
  // Whatever happened above, the response ends here if it has not (idempotent; a final one stays as it is).
  const r = await CancellationScope.nonCancellable(() => db.endBackgroundResponse({ responseId, message: failure }));
  if (r.status) {
    enter(r.status);
    const type = `response.${r.status}` as EventType;
    await events.emitWebhookEvent({ accountId, type, data: { id: responseId }, key: `bgresp:${responseId}:${type}` });
  }
  return r;
}
