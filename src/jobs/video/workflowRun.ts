import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  CancelledFailure,
  patched,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import type { EventType } from '../webhooks';
import type { JobStatus, VideoJobInput } from './workflowContract';
import type { JobActivities } from './workflow';

/**
 * What the steps of the video workflow (./workflow.ts) share: the run's state, its activities, cancellation, the
 * early end of a job, and how activity failures read.
 */

const CANCEL_MESSAGE = "The job was cancelled at the client's request (DELETE /v1/videos/{id}).";

/**
 * Thrown by a step to end the job unsuccessfully (failed or expired) with its reason; end() releases the hold and
 * cancels `cancelTaskId` at the provider. `record` false: the job was already final, nothing to write.
 */
export class UnsuccessfulEnd extends Error {
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

export const cancelled = (taskId: string | null) => new UnsuccessfulEnd('failed', CANCEL_MESSAGE, 'cancelled', taskId);

/**
 * One run's state: its input, its activities (each with its timeouts and retries), the status operators see, the
 * provider task, and the one place a cancel is handled (runSteps).
 */
export class JobRun {
  readonly acts: JobActivities;
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

  constructor(
    readonly input: VideoJobInput,
    acts: JobActivities,
  ) {
    const fromCreation = patched('video-deadline-from-creation') && input.createdAtMs !== undefined;
    this.deadline = fromCreation ? input.createdAtMs! + input.timing.deadlineMs : null;
    // Activities that write (a poll may store an inline video) are never cut off midway, and none starts after a
    // cancel.
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
