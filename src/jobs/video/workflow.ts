import {
  ActivityCancellationType,
  CancellationScope,
  defineQuery,
  defineSignal,
  proxyActivities,
  setHandler,
  sleep,
  type ActivityOptions,
} from '@temporalio/workflow';
import type { WebhookActivities } from '../webhooks';
import {
  CANCEL_SIGNAL,
  STAGE_QUERY,
  type JobStatus,
  type ObserveArgs,
  type PollOutcome,
  type TaskArgs,
  type CopyArgs,
  type JobArgs,
  type VideoActivities,
  type VideoJobInput,
  type VideoJobResult,
  type WorkflowTiming,
} from './workflowContract';
import { failureCode, failureMessage, isNonRetryable, JobRun, UnsuccessfulEnd } from './workflowRun';
import { dbStep, jobRetry } from '../jobActivityOptions';

/**
 * One video job, from submission to a final state (docs/video-jobs.md, its state table):
 *
 *   submitted   submit              the provider accepts the task           -> poll
 *   submitted   pollUntilTerminal   the provider starts it                  -> processing
 *   processing  pollUntilTerminal   the provider finishes it                -> copy
 *   processing  copyResults         the result is in our storage            -> settle
 *   completed   settle              actual cost charged, rest of the hold released
 *   failed, expired    end          (any step, a cancel, or the deadline) the whole hold released; a provider
 *                                   task that may still run is cancelled, or else followed to its end
 *
 * The contract (input, result, activities and their arguments) is src/jobs/video/workflowContract.ts. Each transition,
 * once committed, is announced to the account's webhooks (JobRun.announce: video.processing, video.completed,
 * video.failed, video.expired, video.cancelled). A cancel is handled in one place, JobRun.runSteps
 * (./workflowRun.ts). Deterministic: all I/O happens in activities (./activities.ts), waits are durable timers,
 * so another worker can resume the job at any point.
 * Money: the API held the maximum cost before starting this workflow; exactly one of completeJob (settle) or
 * finishUnsuccessful (end) closes the hold, both idempotent by keys derived from the job id.
 */

/**
 * Activity options: timeouts, retries, heartbeats. A job keeps the timing it started with (its input), so the
 * options are made per job from it.
 */
function activityOptions(t: WorkflowTiming) {
  const retry = jobRetry(t);
  return {
    /** Database steps (status, settle, release, events) must eventually succeed: retried without limit. */
    db: dbStep(t),
    /** Transient provider errors are retried for submitWindowMs; a provider 4xx is not retried. */
    submit: { startToCloseTimeout: t.activityTimeoutMs, scheduleToCloseTimeout: t.submitWindowMs, retry },
    /** A cancel stops the retries but waits for the attempt in flight: a task it creates is reported, never lost. */
    submitToEnd: {
      startToCloseTimeout: t.activityTimeoutMs,
      scheduleToCloseTimeout: t.submitWindowMs,
      retry,
      cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    },
    /** Best effort, a few tries: a provider that cannot cancel does not hold up the end of the job. */
    cancel: { startToCloseTimeout: t.activityTimeoutMs, retry: { ...retry, maximumAttempts: 3 } },
    /** Polls (and looks at a task that outlived its job) retry until the deadline given with each call. */
    poll: {
      startToCloseTimeout: t.activityTimeoutMs,
      retry: { ...retry, maximumInterval: Math.min(t.activityRetryMaxMs, t.pollMaxMs) },
    },
    /** A copy streams for long; its heartbeats tell a dead worker within heartbeatMs. Retried until its deadline. */
    copy: { startToCloseTimeout: t.copyAttemptTimeoutMs, heartbeatTimeout: t.heartbeatMs, retry },
  } satisfies Record<string, ActivityOptions>;
}

/** Every activity the workflow calls, proxied with its options; calls with a deadline retry only until it. */
export function activitiesFor(t: WorkflowTiming) {
  const o = activityOptions(t);
  const db = proxyActivities<VideoActivities>(o.db);
  const events = proxyActivities<WebhookActivities>(o.db);
  const until = (deadline: number, opts: ActivityOptions) =>
    proxyActivities<VideoActivities>({ ...opts, scheduleToCloseTimeout: Math.max(1000, deadline - Date.now()) });
  return {
    submitVideo: proxyActivities<VideoActivities>(o.submit).submitVideo,
    submitVideoToEnd: proxyActivities<VideoActivities>(o.submitToEnd).submitVideo,
    pollVideo: (a: TaskArgs, deadline: number) => until(deadline, o.poll).pollVideo(a),
    markProcessing: (a: JobArgs) => db.markProcessing(a),
    copyResult: (a: CopyArgs, deadline: number) => until(deadline, o.copy).copyResult(a),
    completeJob: db.completeJob,
    finishUnsuccessful: db.finishUnsuccessful,
    cancelProviderTask: (a: TaskArgs) =>
      proxyActivities<VideoActivities>(o.cancel)
        .cancelProviderTask(a)
        .catch(() => false),
    observeProviderTask: (a: ObserveArgs, deadline: number) => until(deadline, o.poll).observeProviderTask(a),
    /** Never cut off by a cancel: a transition that committed is always told. */
    emitWebhookEvent: (a: Parameters<WebhookActivities['emitWebhookEvent']>[0]) =>
      CancellationScope.nonCancellable(() => events.emitWebhookEvent(a)),
  };
}
export type JobActivities = ReturnType<typeof activitiesFor>;

/** DELETE /v1/videos/{id}: cancel the job if it is not final. */
export const cancelSignal = defineSignal<[]>(CANCEL_SIGNAL);
/** The job's status as this workflow sees it, for operators (temporal workflow query). */
export const stageQuery = defineQuery<JobStatus>(STAGE_QUERY);

export async function videoJobWorkflow(input: VideoJobInput): Promise<VideoJobResult> {
  const job = new JobRun(input, activitiesFor(input.timing));
  setHandler(cancelSignal, () => job.requestCancel());
  setHandler(stageQuery, () => job.status);
  try {
    const outcome = await job.runSteps(async () => {
      const taskId = await submit(job);
      const polled = await pollUntilTerminal(job, taskId);
      await copyResults(job, polled);
      return polled;
    });
    return await settle(job, outcome);
  } catch (e) {
    if (e instanceof UnsuccessfulEnd) return end(job, e);
    throw e;
  }
}

/**
 * Submit (transient errors retried for submitWindowMs; a provider 4xx fails the job at once). A cancel stops the
 * retries but lets an attempt in flight finish, so a task the provider created is known and cancelled by end().
 */
async function submit(job: JobRun): Promise<string> {
  const submitVideo = job.keepsTask ? job.acts.submitVideoToEnd : job.acts.submitVideo;
  const notAfter = job.deadline ?? undefined;
  const s = await submitVideo({ jobId: job.input.jobId, ...(notAfter !== undefined ? { notAfter } : {}) }).catch(
    (e) => {
      throw new UnsuccessfulEnd('failed', failureMessage(e, 'The provider did not accept the job'), failureCode(e));
    },
  );
  if (s.pastDeadline) throw new UnsuccessfulEnd('expired', expiredMessage(job), 'deadline_exceeded');
  if (job.keepsTask) job.taskId = s.taskId; // a task created while the job was ended is still ours to cancel
  if (s.alreadyFinal)
    throw new UnsuccessfulEnd('failed', 'The job was already final before it was submitted.', null, job.taskId, false);
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
    if (Date.now() >= deadline) throw new UnsuccessfulEnd('expired', expiredMessage(job), 'deadline_exceeded', taskId);
    delay = delay === 0 ? t.pollInitialMs : Math.min(Math.ceil(delay * t.pollBackoff), t.pollMaxMs);
    let p: PollOutcome;
    try {
      p = await job.acts.pollVideo({ jobId: job.input.jobId, taskId }, deadline);
    } catch (e) {
      if (isNonRetryable(e))
        throw new UnsuccessfulEnd('failed', failureMessage(e, 'Polling the provider failed'), failureCode(e));
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
    return succeededOrEnd(p);
  }
}

/** A terminal poll: the outcome when the task succeeded, else how the job ends. */
function succeededOrEnd(p: PollOutcome): PollOutcome {
  if (p.state === 'succeeded') return p;
  if (p.state === 'expired')
    throw new UnsuccessfulEnd(
      'expired',
      p.errorMessage ?? 'The provider task expired before it finished.',
      p.errorCode ?? 'provider_expired',
    );
  const message =
    p.state === 'cancelled'
      ? 'The provider cancelled the task.'
      : (p.errorMessage ?? 'The provider reported a failure.');
  throw new UnsuccessfulEnd(
    'failed',
    message,
    p.contentFiltered ? 'content_filter' : (p.errorCode ?? 'provider_failed'),
  );
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
      throw new UnsuccessfulEnd(
        'failed',
        `The result could not be copied from the provider in time: ${failureMessage(e, 'copy failed')}`,
        'copy_failed',
      );
    });
  if (!outcome.videoStored) {
    if (!outcome.videoUrl)
      throw new UnsuccessfulEnd('failed', 'The provider reported success without a video.', 'no_result');
    await copy('video', outcome.videoUrl);
  }
  if (returnLastFrame) {
    if (!outcome.lastFrameUrl)
      throw new UnsuccessfulEnd(
        'failed',
        'The provider did not return the last frame that was asked for.',
        'no_last_frame',
      );
    await copy('last_frame', outcome.lastFrameUrl);
  }
}

/** Charge the actual duration x the price of what was delivered (never more than the hold); release the rest. */
async function settle(job: JobRun, outcome: PollOutcome): Promise<VideoJobResult> {
  const { jobId, holdId, seconds, pricePerSecond, maxCostVnd } = job.input;
  const durationSeconds =
    outcome.durationSeconds !== undefined && outcome.durationSeconds > 0 ? Math.ceil(outcome.durationSeconds) : seconds;
  const heldRate = Math.min(durationSeconds * pricePerSecond, maxCostVnd);
  const delivered = { resolution: outcome.resolution, generateAudio: outcome.generateAudio, tier: outcome.tier };
  // The activity prices what was delivered and says what it charged (histories of older builds answer nothing:
  // their charge was the held rate). Same command as before: no patch needed.
  const done = await job.acts.completeJob({ jobId, holdId, chargeVnd: heldRate, durationSeconds, delivered });
  const costVnd = done ? done.costVnd : heldRate;
  await job.announce('video.completed');
  job.enter('completed');
  return { status: 'completed', costVnd, durationSeconds };
}

/**
 * The one way a job ends early (failure, expiry, cancel): cancel the provider task if it may still run, release
 * the hold. A task the provider could not cancel is then followed to its end (the job stays as it ended).
 */
async function end(job: JobRun, e: UnsuccessfulEnd): Promise<VideoJobResult> {
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
