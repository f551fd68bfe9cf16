import { ActivityFailure, ApplicationFailure, proxyActivities, upsertSearchAttributes, type ActivityOptions } from '@temporalio/workflow';
import type { VideoActivities } from '../activities/video';
import type { JobStatus } from '../src/video/jobs';
import type { VideoJobInput } from '../src/video/start';
import type { WorkflowTiming } from '../src/video/settings';

/**
 * What the steps of the video workflow (./videoJob.ts) share: the run's state, its activities (each with its
 * timeouts and retries), the early end of a job, and how activity failures read.
 */

const CANCEL_MESSAGE = 'The job was cancelled at the client\'s request (DELETE /v1/videos/{id}).';

/** How a step ends the job early; `record` false: the job was already final, nothing to write. */
export class JobEnds extends Error {
  constructor(readonly status: 'failed' | 'expired', message: string, readonly code: string | null, readonly cancelTaskId: string | null = null, readonly record = true) {
    super(message);
  }
}

export const cancelled = (taskId: string | null) => new JobEnds('failed', CANCEL_MESSAGE, 'cancelled', taskId);

/** One run's state: its input, its activities, the status operators see, and whether a cancel has arrived. */
export class JobRun {
  readonly acts: ReturnType<typeof activitiesFor>;
  status: JobStatus = 'submitted';
  cancelRequested = false;
  constructor(readonly input: VideoJobInput) {
    this.acts = activitiesFor(input.timing);
  }

  requestCancel(): void {
    this.cancelRequested = true;
  }

  /** A new status for operators: the stage query and the status search attribute. */
  enter(status: JobStatus): void {
    this.status = status;
    if (this.input.statusSearchAttribute) upsertSearchAttributes({ [this.input.statusSearchAttribute]: [status] });
  }

  /** At a step boundary, a cancel that has arrived ends the job. */
  stopIfCancelled(taskId: string | null): void {
    if (this.cancelRequested) throw cancelled(taskId);
  }
}

/** Every activity the workflow calls, with its timeouts and retries. */
export function activitiesFor(t: WorkflowTiming) {
  const retry = { initialInterval: t.activityRetryInitialMs, backoffCoefficient: 2, maximumInterval: t.activityRetryMaxMs };
  // Database steps (status, settle, release) must eventually succeed: retried without limit.
  const db = proxyActivities<VideoActivities>({ startToCloseTimeout: t.activityTimeoutMs, retry });
  const submitting = proxyActivities<VideoActivities>({ startToCloseTimeout: t.activityTimeoutMs, scheduleToCloseTimeout: t.submitWindowMs, retry });
  const cancelling = proxyActivities<VideoActivities>({ startToCloseTimeout: t.activityTimeoutMs, retry: { ...retry, maximumAttempts: 3 } });
  // Polls and copies retry only until their deadline, so their options are made per call.
  const until = (deadline: number, o: ActivityOptions) => proxyActivities<VideoActivities>({ ...o, scheduleToCloseTimeout: Math.max(1000, deadline - Date.now()) });
  const polling: ActivityOptions = { startToCloseTimeout: t.activityTimeoutMs, retry: { ...retry, maximumInterval: Math.min(t.activityRetryMaxMs, t.pollMaxMs) } };
  const copying: ActivityOptions = { startToCloseTimeout: t.copyAttemptTimeoutMs, heartbeatTimeout: t.heartbeatMs, retry };
  return {
    submitVideo: submitting.submitVideo,
    pollVideo: (a: { jobId: string; taskId: string }, deadline: number) => until(deadline, polling).pollVideo(a),
    markProcessing: db.markProcessing,
    copyResult: (a: { jobId: string; variant: 'video' | 'last_frame'; url: string }, deadline: number) => until(deadline, copying).copyResult(a),
    completeJob: db.completeJob,
    finishUnsuccessful: db.finishUnsuccessful,
    /** Best effort: a provider that cannot cancel does not hold up the end of the job. */
    cancelProviderTask: (a: { jobId: string; taskId: string }) => cancelling.cancelProviderTask(a).catch(() => false),
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
