import {
  ActivityFailure, ApplicationFailure, CancellationScope, condition, defineQuery, defineSignal, proxyActivities, setHandler, upsertSearchAttributes,
  type ActivityOptions,
} from '@temporalio/workflow';
import type { VideoActivities, PollOutcome } from '../activities/video';
import type { WorkflowTiming } from '../src/video/settings';

/**
 * One video job, from submission to a final state (design.md "Video job"). Deterministic: all I/O happens in
 * activities (activities/video.ts); waits are durable timers, so a worker can die at any point and another
 * resumes the job. Money: the API placed a hold for the maximum cost before starting this workflow; exactly one
 * of completeJob (charge the actual cost, release the rest) or finishUnsuccessful (release all) ends it, both
 * idempotent by keys derived from the job id.
 */

export interface VideoJobInput {
  jobId: string;
  holdId: string;
  accountId: string;
  model: string;
  /** Requested seconds and price, fixed at submission (the hold is seconds x price). */
  seconds: number;
  pricePerSecond: number;
  maxCostVnd: number;
  returnLastFrame: boolean;
  timing: WorkflowTiming;
  /**
   * The status search attribute (src/runtime/searchAttributes.ts, `GatewayJobStatus`), upserted on each change;
   * null when the namespace lacks the gateway's attributes. Passed in so this file imports nothing else.
   */
  statusSearchAttribute: string | null;
}

export type VideoJobResult = { status: 'completed'; costVnd: number; durationSeconds: number } | { status: 'failed' | 'expired'; message: string };

/** DELETE /v1/videos/{id}: cancel the job if it is not final. */
export const cancelSignal = defineSignal<[]>('cancel');
/** Where the job is, for operators (temporal workflow query). */
export const stageQuery = defineQuery<string>('stage');

export const CANCEL_MESSAGE = 'The job was cancelled at the client\'s request (DELETE /v1/videos/{id}).';

export async function videoJobWorkflow(input: VideoJobInput): Promise<VideoJobResult> {
  const t = input.timing;
  let cancelRequested = false;
  let stage = 'submitting';
  setHandler(cancelSignal, () => {
    cancelRequested = true;
  });
  setHandler(stageQuery, () => stage);

  const retry = { initialInterval: t.activityRetryInitialMs, backoffCoefficient: 2, maximumInterval: t.activityRetryMaxMs };
  // Database steps (status, settle, release) must eventually succeed: retried without limit.
  const db = proxyActivities<VideoActivities>({ startToCloseTimeout: t.activityTimeoutMs, retry });
  const submitting = proxyActivities<VideoActivities>({ startToCloseTimeout: t.activityTimeoutMs, scheduleToCloseTimeout: t.submitWindowMs, retry });
  const cancelling = proxyActivities<VideoActivities>({ startToCloseTimeout: t.activityTimeoutMs, retry: { ...retry, maximumAttempts: 3 } });

  const setStatus = (status: string) => {
    if (input.statusSearchAttribute) upsertSearchAttributes({ [input.statusSearchAttribute]: [status] });
  };
  const fail = async (status: 'failed' | 'expired', message: string, code: string | null): Promise<VideoJobResult> => {
    stage = status;
    await db.finishUnsuccessful({ jobId: input.jobId, holdId: input.holdId, status, message, code });
    setStatus(status);
    return { status, message };
  };
  const cancelled = async (taskId: string | null): Promise<VideoJobResult> => {
    if (taskId) await cancelling.cancelProviderTask({ jobId: input.jobId, taskId }).catch(() => false);
    return fail('failed', CANCEL_MESSAGE, 'cancelled');
  };

  // 1. Submit (transient errors retried for submitWindowMs; a provider 4xx fails the job at once).
  // A cancel while submission is still being retried (provider down) ends the job without waiting for it.
  let taskId: string;
  const submitScope = new CancellationScope();
  const submission = submitScope.run(() => submitting.submitVideo({ jobId: input.jobId }));
  submission.catch(() => undefined);
  const cancelledFirst = condition(() => cancelRequested).then(() => 'cancel' as const);
  try {
    const s = await Promise.race([submission, cancelledFirst]);
    if (s === 'cancel') {
      submitScope.cancel();
      return cancelled(null);
    }
    if (s.alreadyFinal) return { status: 'failed', message: 'The job was already final before it was submitted.' };
    if (s.cancelRequested || !s.taskId) return cancelled(s.taskId);
    taskId = s.taskId;
  } catch (e) {
    return fail('failed', failureMessage(e, 'The provider did not accept the job'), failureCode(e));
  }
  if (cancelRequested) return cancelled(taskId);

  // 2. Poll with backoff on durable timers until terminal, cancelled, or the deadline.
  stage = 'polling';
  const deadline = Date.now() + t.deadlineMs;
  // The first poll goes out at once (it moves a started task to processing); then the waits grow.
  let delay = 0;
  let processing = false;
  let outcome: PollOutcome | null = null;
  for (;;) {
    const wait = Math.min(delay, Math.max(0, deadline - Date.now()));
    if (wait > 0 && (await condition(() => cancelRequested, wait))) return cancelled(taskId);
    if (Date.now() >= deadline) {
      await cancelling.cancelProviderTask({ jobId: input.jobId, taskId }).catch(() => false);
      return fail('expired', `No result from the provider within ${Math.round(t.deadlineMs / 1000)} s.`, 'deadline_exceeded');
    }
    delay = delay === 0 ? t.pollInitialMs : Math.min(Math.ceil(delay * t.pollBackoff), t.pollMaxMs);
    let p: PollOutcome;
    try {
      const polling = proxyActivities<VideoActivities>({
        startToCloseTimeout: t.activityTimeoutMs, scheduleToCloseTimeout: Math.max(1000, deadline - Date.now()),
        retry: { ...retry, maximumInterval: Math.min(t.activityRetryMaxMs, t.pollMaxMs) },
      });
      p = await polling.pollVideo({ jobId: input.jobId, taskId });
    } catch (e) {
      if (isNonRetryable(e)) return fail('failed', failureMessage(e, 'Polling the provider failed'), failureCode(e));
      continue; // transient failures past their retries: the deadline check above decides
    }
    if (cancelRequested || p.cancelRequested) return cancelled(taskId);
    if (!processing && p.state !== 'queued') {
      processing = true;
      if (p.state === 'running' || p.state === 'succeeded') {
        await db.markProcessing({ jobId: input.jobId });
        setStatus('processing');
      }
    }
    if (p.state === 'queued' || p.state === 'running') continue;
    outcome = p;
    break;
  }

  if (outcome.state === 'expired') return fail('expired', outcome.errorMessage ?? 'The provider task expired before it finished.', outcome.errorCode ?? 'provider_expired');
  if (outcome.state !== 'succeeded') {
    const message = outcome.state === 'cancelled' ? 'The provider cancelled the task.' : outcome.errorMessage ?? 'The provider reported a failure.';
    return fail('failed', message, outcome.contentFiltered ? 'content_filter' : outcome.errorCode ?? 'provider_failed');
  }

  // 3. Copy the result into our storage at once, streaming; retries are bounded by copyWindowMs, far inside the
  //    provider's retention. A result that cannot be copied in time fails the job and charges nothing.
  stage = 'copying';
  const copyDeadline = Date.now() + t.copyWindowMs;
  const copyOpts = (): ActivityOptions => ({
    startToCloseTimeout: t.copyAttemptTimeoutMs, heartbeatTimeout: t.heartbeatMs,
    scheduleToCloseTimeout: Math.max(1000, copyDeadline - Date.now()), retry,
  });
  try {
    if (!outcome.videoStored) {
      if (!outcome.videoUrl) return fail('failed', 'The provider reported success without a video.', 'no_result');
      await proxyActivities<VideoActivities>(copyOpts()).copyResult({ jobId: input.jobId, variant: 'video', url: outcome.videoUrl });
    }
    if (input.returnLastFrame) {
      if (!outcome.lastFrameUrl) return fail('failed', 'The provider did not return the last frame that was asked for.', 'no_last_frame');
      await proxyActivities<VideoActivities>(copyOpts()).copyResult({ jobId: input.jobId, variant: 'last_frame', url: outcome.lastFrameUrl });
    }
  } catch (e) {
    return fail('failed', `The result could not be copied from the provider in time: ${failureMessage(e, 'copy failed')}`, 'copy_failed');
  }
  if (cancelRequested) return cancelled(null);

  // 4. Charge the actual duration x price (never more than the hold) and release the rest.
  stage = 'settling';
  const reported = outcome.durationSeconds;
  const durationSeconds = reported !== undefined && reported > 0 ? Math.ceil(reported) : input.seconds;
  const costVnd = Math.min(durationSeconds * input.pricePerSecond, input.maxCostVnd);
  await db.completeJob({ jobId: input.jobId, holdId: input.holdId, chargeVnd: costVnd, durationSeconds });
  setStatus('completed');
  stage = 'completed';
  return { status: 'completed', costVnd, durationSeconds };
}

function rootFailure(e: unknown): unknown {
  let cur = e;
  while (cur instanceof ActivityFailure && cur.cause) cur = cur.cause;
  return cur;
}

function isNonRetryable(e: unknown): boolean {
  const r = rootFailure(e);
  return r instanceof ApplicationFailure && r.nonRetryable === true;
}

function failureMessage(e: unknown, fallback: string): string {
  const r = rootFailure(e) as { message?: string; cause?: { message?: string } } | undefined;
  const m = r?.message || r?.cause?.message;
  return m ? m.slice(0, 1000) : fallback;
}

function failureCode(e: unknown): string | null {
  const r = rootFailure(e);
  if (r instanceof ApplicationFailure) return r.type ?? null;
  return null;
}
