import {
  ActivityCancellationType,
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  CancelledFailure,
  patched,
  proxyActivities,
  upsertSearchAttributes,
  type ActivityOptions,
} from '@temporalio/workflow';
import type { VideoActivities } from '../activities/video';
import type { WebhookActivities } from '../activities/webhooks';
import type { EventType } from '../src/webhooks/eventTypes';
import type { JobStatus } from '../src/video/jobs';
import type { VideoJobInput } from '../src/video/start';
import type { WorkflowTiming } from '../src/video/settings';

/**
 * What the steps of the video workflow (./videoJob.ts) share: the run's state, its activities (each with its
 * timeouts and retries), cancellation, the early end of a job, and how activity failures read.
 */

const CANCEL_MESSAGE = "The job was cancelled at the client's request (DELETE /v1/videos/{id}).";

/** How a step ends the job early; `record` false: the job was already final, nothing to write. */
export class JobEnds extends Error {
  constructor(
    readonly status: 'failed' | 'expired',
    message: string,
    readonly code: string | null,
    readonly cancelTaskId: string | null = null,
    readonly record = true,
  ) {
    super(message);
  }
}

export const cancelled = (taskId: string | null) => new JobEnds('failed', CANCEL_MESSAGE, 'cancelled', taskId);

/**
 * One run's state: its input, its activities (each with its timeouts and retries), the status operators see, the
 * provider task, and the one place a cancel is handled (runSteps).
 */
export class JobRun {
  readonly acts: ReturnType<typeof activitiesFor>;
  status: JobStatus = 'submitted';
  /** The provider's task while it may still run: a cancel cancels it too. */
  taskId: string | null = null;
  /** The scope the steps run in; a cancel cancels it. */
  private readonly steps = new CancellationScope();
  /**
   * A cancel lets a submission in flight finish, and a task that outlives its job is cancelled or followed to its
   * end (false for jobs started by an earlier build, which replay as they ran).
   */
  readonly keepsTask = patched('video-keeps-provider-task');
  /**
   * When the job expires: its creation + deadlineMs, the same in every run of the job (a workflow restarted by the
   * reconciler included); null for jobs started by an earlier build, whose deadline starts at their first poll.
   */
  readonly deadline: number | null;
  /** Each committed transition is announced to the account's webhooks (false for jobs started before webhooks). */
  private readonly announces = patched('video-webhooks');

  constructor(readonly input: VideoJobInput) {
    const fromCreation = patched('video-deadline-from-creation') && input.createdAtMs !== undefined;
    this.deadline = fromCreation ? input.createdAtMs! + input.timing.deadlineMs : null;
    const acts = activitiesFor(input.timing);
    // Activities that write (a poll may store an inline video) are never cut off midway, and none starts after a cancel.
    this.acts = {
      ...acts,
      pollVideo: this.whole(acts.pollVideo),
      markProcessing: this.whole(acts.markProcessing),
      copyResult: this.whole(acts.copyResult),
    };
  }

  /** DELETE /v1/videos/{id}: its signal, or a cancel an activity found recorded before this run could hear it. */
  requestCancel(): void {
    this.steps.cancel();
  }

  /** An activity reported a cancel recorded in the database: the job stops as for the signal. */
  stopIfCancelRecorded(recorded: boolean | undefined): void {
    if (!recorded) return;
    this.requestCancel();
    throw new CancelledFailure(CANCEL_MESSAGE);
  }

  /**
   * Runs the job's steps up to settling. A cancel cuts off what they wait on (a submission being retried, the
   * timer between polls), lets a writing activity finish, and then, whatever the steps were doing, ends the job:
   * the provider task cancelled if it may still run, the whole hold released (by end()). Settling is never cut off.
   */
  async runSteps<T>(steps: () => Promise<T>): Promise<T> {
    try {
      const out = await this.steps.run(steps);
      if (!this.steps.consideredCancelled) return out;
    } catch (e) {
      if (!this.steps.consideredCancelled) throw e;
    }
    throw cancelled(this.taskId);
  }

  /**
   * Emits the event of a transition that has committed: once per job and type (the key), whatever retries or
   * replays; never cut off by a cancel, so a transition that happened is always told.
   */
  async announce(type: EventType): Promise<void> {
    if (!this.announces) return;
    const { jobId, accountId } = this.input;
    await this.acts.emitWebhookEvent({ accountId, type, data: { id: jobId }, key: `video:${jobId}:${type}` });
  }

  /** A new status for operators: the stage query and the status search attribute. */
  enter(status: JobStatus): void {
    this.status = status;
    if (this.input.statusSearchAttribute) upsertSearchAttributes({ [this.input.statusSearchAttribute]: [status] });
  }

  private whole<A extends unknown[], R>(activity: (...a: A) => Promise<R>): (...a: A) => Promise<R> {
    return (...a) =>
      this.steps.consideredCancelled
        ? Promise.reject(new CancelledFailure(CANCEL_MESSAGE))
        : CancellationScope.nonCancellable(() => activity(...a));
  }
}

/** Every activity the workflow calls, with its timeouts and retries. */
export function activitiesFor(t: WorkflowTiming) {
  const retry = {
    initialInterval: t.activityRetryInitialMs,
    backoffCoefficient: 2,
    maximumInterval: t.activityRetryMaxMs,
  };
  // Database steps (status, settle, release) must eventually succeed: retried without limit.
  const db = proxyActivities<VideoActivities>({ startToCloseTimeout: t.activityTimeoutMs, retry });
  const events = proxyActivities<WebhookActivities>({ startToCloseTimeout: t.activityTimeoutMs, retry });
  const submitting = proxyActivities<VideoActivities>({
    startToCloseTimeout: t.activityTimeoutMs,
    scheduleToCloseTimeout: t.submitWindowMs,
    retry,
  });
  // A cancel stops the retries but waits for the attempt in flight: a task it creates is reported, never lost.
  const submittingToEnd = proxyActivities<VideoActivities>({
    startToCloseTimeout: t.activityTimeoutMs,
    scheduleToCloseTimeout: t.submitWindowMs,
    retry,
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
  });
  const cancelling = proxyActivities<VideoActivities>({
    startToCloseTimeout: t.activityTimeoutMs,
    retry: { ...retry, maximumAttempts: 3 },
  });
  // Polls and copies retry only until their deadline, so their options are made per call.
  const until = (deadline: number, o: ActivityOptions) =>
    proxyActivities<VideoActivities>({ ...o, scheduleToCloseTimeout: Math.max(1000, deadline - Date.now()) });
  const polling: ActivityOptions = {
    startToCloseTimeout: t.activityTimeoutMs,
    retry: { ...retry, maximumInterval: Math.min(t.activityRetryMaxMs, t.pollMaxMs) },
  };
  const copying: ActivityOptions = {
    startToCloseTimeout: t.copyAttemptTimeoutMs,
    heartbeatTimeout: t.heartbeatMs,
    retry,
  };
  return {
    submitVideo: submitting.submitVideo,
    submitVideoToEnd: submittingToEnd.submitVideo,
    pollVideo: (a: { jobId: string; taskId: string }, deadline: number) => until(deadline, polling).pollVideo(a),
    markProcessing: (a: { jobId: string }) => db.markProcessing(a),
    copyResult: (a: { jobId: string; variant: 'video' | 'last_frame'; url: string }, deadline: number) =>
      until(deadline, copying).copyResult(a),
    completeJob: db.completeJob,
    finishUnsuccessful: db.finishUnsuccessful,
    /** Best effort: a provider that cannot cancel does not hold up the end of the job. */
    cancelProviderTask: (a: { jobId: string; taskId: string }) => cancelling.cancelProviderTask(a).catch(() => false),
    observeProviderTask: (a: { jobId: string; taskId: string; last: boolean }, deadline: number) =>
      until(deadline, polling).observeProviderTask(a),
    emitWebhookEvent: (a: Parameters<WebhookActivities['emitWebhookEvent']>[0]) =>
      CancellationScope.nonCancellable(() => events.emitWebhookEvent(a)),
  };
}

function rootFailure(e: unknown): unknown {
  let cur = e;
  while (cur instanceof ActivityFailure && cur.cause) cur = cur.cause;
  return cur;
}

export function isNonRetryable(e: unknown): boolean {
  const r = rootFailure(e);
  return r instanceof ApplicationFailure && r.nonRetryable === true;
}

export function failureMessage(e: unknown, fallback: string): string {
  const r = rootFailure(e) as { message?: string; cause?: { message?: string } } | undefined;
  const m = r?.message || r?.cause?.message;
  return m ? m.slice(0, 1000) : fallback;
}

export function failureCode(e: unknown): string | null {
  const r = rootFailure(e);
  if (r instanceof ApplicationFailure) return r.type ?? null;
  return null;
}
