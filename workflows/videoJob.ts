import { defineQuery, defineSignal, setHandler, sleep } from '@temporalio/workflow';
import type { PollOutcome } from '../activities/video';
import type { JobStatus } from '../src/video/jobs';
import type { VideoJobInput, VideoJobResult } from '../src/video/start';
import { failureCode, failureMessage, isNonRetryable, JobEnds, JobRun } from './videoJobRun';

/**
 * One video job, from submission to a final state (../shared/design.md "Video job"; the spec's state table):
 *
 *   submitted   submitOrCancel      the provider accepts the task           -> poll
 *   submitted   pollUntilTerminal   the provider starts it                  -> processing
 *   processing  pollUntilTerminal   the provider finishes it                -> copy
 *   processing  copyResults         the result is in our storage            -> settle
 *   completed   settle              actual cost charged, rest of the hold released
 *   failed, expired    end          (any step, a cancel, or the deadline) the whole hold released; a provider
 *                                   task that may still run is cancelled, or else followed to its end
 *
 * Each transition, once committed, is announced to the account's webhooks (JobRun.announce: video.processing,
 * video.completed, video.failed, video.expired, video.cancelled). A cancel is handled in one place, JobRun.runSteps
 * (./videoJobRun.ts). Deterministic: all I/O happens in activities (activities/video.ts), waits are durable timers,
 * so another worker can resume the job at any point.
 * Money: the API held the maximum cost before starting this workflow; exactly one of completeJob (settle) or
 * finishUnsuccessful (end) closes the hold, both idempotent by keys derived from the job id.
 */

/** DELETE /v1/videos/{id}: cancel the job if it is not final. */
export const cancelSignal = defineSignal<[]>('cancel');
/** The job's status as this workflow sees it, for operators (temporal workflow query). */
export const stageQuery = defineQuery<JobStatus>('stage');

export async function videoJobWorkflow(input: VideoJobInput): Promise<VideoJobResult> {
  const job = new JobRun(input);
  setHandler(cancelSignal, () => job.requestCancel());
  setHandler(stageQuery, () => job.status);
  try {
    const outcome = await job.runSteps(async () => {
      const taskId = await submitOrCancel(job);
      const polled = await pollUntilTerminal(job, taskId);
      await copyResults(job, polled);
      return polled;
    });
    return await settle(job, outcome);
  } catch (e) {
    if (e instanceof JobEnds) return end(job, e);
    throw e;
  }
}

/**
 * Submit (transient errors retried for submitWindowMs; a provider 4xx fails the job at once). A cancel stops the
 * retries but lets an attempt in flight finish, so a task the provider created is known and cancelled by end().
 */
async function submitOrCancel(job: JobRun): Promise<string> {
  const submit = job.keepsTask ? job.acts.submitVideoToEnd : job.acts.submitVideo;
  const notAfter = job.deadline ?? undefined;
  const s = await submit({ jobId: job.input.jobId, ...(notAfter !== undefined ? { notAfter } : {}) }).catch((e) => {
    throw new JobEnds('failed', failureMessage(e, 'The provider did not accept the job'), failureCode(e));
  });
  if (s.pastDeadline) throw new JobEnds('expired', expiredMessage(job), 'deadline_exceeded');
  if (job.keepsTask) job.taskId = s.taskId; // a task created while the job was ended is still ours to cancel
  if (s.alreadyFinal)
    throw new JobEnds('failed', 'The job was already final before it was submitted.', null, job.taskId, false);
  job.taskId = s.taskId;
  job.stopIfCancelRecorded(s.cancelRequested || !s.taskId); // the task id is missing only when a cancel stopped it
  return s.taskId!;
}

/** Poll with backoff on durable timers until the task is terminal or the deadline passes. */
async function pollUntilTerminal(job: JobRun, taskId: string): Promise<PollOutcome> {
  const t = job.input.timing;
  const deadline = job.deadline ?? Date.now() + t.deadlineMs;
  let delay = 0; // the first poll goes out at once (it moves a started task to processing); then the waits grow
  for (;;) {
    const wait = Math.min(delay, Math.max(0, deadline - Date.now()));
    if (wait > 0) await sleep(wait);
    if (Date.now() >= deadline) throw new JobEnds('expired', expiredMessage(job), 'deadline_exceeded', taskId);
    delay = delay === 0 ? t.pollInitialMs : Math.min(Math.ceil(delay * t.pollBackoff), t.pollMaxMs);
    let p: PollOutcome;
    try {
      p = await job.acts.pollVideo({ jobId: job.input.jobId, taskId }, deadline);
    } catch (e) {
      if (isNonRetryable(e))
        throw new JobEnds('failed', failureMessage(e, 'Polling the provider failed'), failureCode(e));
      continue; // transient failures past their retries: the deadline check above decides
    }
    job.stopIfCancelRecorded(p.cancelRequested);
    if (job.status === 'submitted' && (p.state === 'running' || p.state === 'succeeded')) {
      await job.acts.markProcessing({ jobId: job.input.jobId });
      await job.announce('video.processing');
      job.enter('processing');
    }
    if (p.state === 'queued' || p.state === 'running') continue;
    job.taskId = null; // terminal: nothing left to cancel at the provider
    if (p.state === 'expired')
      throw new JobEnds(
        'expired',
        p.errorMessage ?? 'The provider task expired before it finished.',
        p.errorCode ?? 'provider_expired',
      );
    if (p.state !== 'succeeded') {
      const message =
        p.state === 'cancelled'
          ? 'The provider cancelled the task.'
          : (p.errorMessage ?? 'The provider reported a failure.');
      throw new JobEnds('failed', message, p.contentFiltered ? 'content_filter' : (p.errorCode ?? 'provider_failed'));
    }
    return p;
  }
}

const expiredMessage = (job: JobRun) =>
  `No result from the provider within ${Math.round(job.input.timing.deadlineMs / 1000)} s` +
  (job.deadline === null ? '.' : " of the job's creation.");

/**
 * Copy the result into our storage at once, streaming; retries are bounded by copyWindowMs, far inside the
 * provider's retention. A result that cannot be copied in time fails the job and charges nothing.
 */
async function copyResults(job: JobRun, outcome: PollOutcome): Promise<void> {
  const { jobId, returnLastFrame, timing } = job.input;
  const until = Date.now() + timing.copyWindowMs;
  const copy = (variant: 'video' | 'last_frame', url: string) =>
    job.acts.copyResult({ jobId, variant, url }, until).catch((e) => {
      throw new JobEnds(
        'failed',
        `The result could not be copied from the provider in time: ${failureMessage(e, 'copy failed')}`,
        'copy_failed',
      );
    });
  if (!outcome.videoStored) {
    if (!outcome.videoUrl) throw new JobEnds('failed', 'The provider reported success without a video.', 'no_result');
    await copy('video', outcome.videoUrl);
  }
  if (returnLastFrame) {
    if (!outcome.lastFrameUrl)
      throw new JobEnds('failed', 'The provider did not return the last frame that was asked for.', 'no_last_frame');
    await copy('last_frame', outcome.lastFrameUrl);
  }
}

/** Charge the actual duration x price (never more than the hold) and release the rest. */
async function settle(job: JobRun, outcome: PollOutcome): Promise<VideoJobResult> {
  const { jobId, holdId, seconds, pricePerSecond, maxCostVnd } = job.input;
  const durationSeconds =
    outcome.durationSeconds !== undefined && outcome.durationSeconds > 0 ? Math.ceil(outcome.durationSeconds) : seconds;
  const costVnd = Math.min(durationSeconds * pricePerSecond, maxCostVnd);
  await job.acts.completeJob({ jobId, holdId, chargeVnd: costVnd, durationSeconds });
  await job.announce('video.completed');
  job.enter('completed');
  return { status: 'completed', costVnd, durationSeconds };
}

/**
 * The one way a job ends early (failure, expiry, cancel): cancel the provider task if it may still run, release
 * the hold. A task the provider could not cancel is then followed to its end (the job stays as it ended).
 */
async function end(job: JobRun, e: JobEnds): Promise<VideoJobResult> {
  const { jobId, holdId } = job.input;
  let cancelled = false;
  if (e.cancelTaskId && (e.record || job.keepsTask))
    cancelled = await job.acts.cancelProviderTask({ jobId, taskId: e.cancelTaskId });
  if (e.record) {
    await job.acts.finishUnsuccessful({ jobId, holdId, status: e.status, message: e.message, code: e.code });
    await job.announce(
      e.code === 'cancelled' ? 'video.cancelled' : e.status === 'expired' ? 'video.expired' : 'video.failed',
    );
    job.enter(e.status);
  }
  if (job.keepsTask && e.cancelTaskId && !cancelled) await followToEnd(job, e.cancelTaskId);
  return { status: e.status, message: e.message };
}

/**
 * A task that outlived its job runs on at the gateway's cost: look at it, less and less often, until it ends or
 * the follow window (from the job's creation) closes; the activity records how it ended.
 */
async function followToEnd(job: JobRun, taskId: string): Promise<void> {
  const { jobId, timing: t } = job.input;
  const until = (job.input.createdAtMs ?? Date.now()) + t.followWindowMs;
  let delay = t.pollInitialMs;
  for (;;) {
    const wait = Math.min(delay, Math.max(0, until - Date.now()));
    if (wait > 0) await sleep(wait);
    const last = Date.now() >= until;
    delay = Math.min(Math.ceil(delay * t.pollBackoff), t.pollMaxMs * 10);
    const state = await job.acts
      .observeProviderTask({ jobId, taskId, last }, last ? Date.now() + t.activityTimeoutMs : until)
      .catch(() => null);
    if (last || (state !== null && state !== 'queued' && state !== 'running')) return;
  }
}
