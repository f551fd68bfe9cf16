import { Readable } from 'node:stream';
import { Context } from '@temporalio/activity';
import type { Db } from '../../db';
import type { Storage } from '../../storage';
import type { Catalog } from '../../catalog';
import { redactorFor } from '../../catalog';
import type { Logger } from '../../observability';
import { type VideoProviders, VideoProviderError, type VideoTaskState } from '../../providers';
import { ModelRouter, loadRoutingSettings } from '../../modelCall';
import * as jobs from './repo';
import { deleteStoredImages } from './images';
import { recordTaskEnd, taskGatewayCost, type TwinDelivery } from './twins';
import { askedDims, deliveredDims, videoSecondPrice } from '../../billing';
import type {
  CompleteArgs,
  CompleteOutcome,
  EndUnsuccessfulArgs,
  JobArgs,
  ObserveArgs,
  PollOutcome,
  TaskArgs,
  VideoActivities,
} from './workflowContract';
import { copyResult } from './copyActivity';
import { submitVideo } from './submitActivity';
import { adapterOf, loadJob, toFailure, videoKeyOf, type VideoActivityContext } from './activityContext';

/**
 * The video workflow's activities (src/jobs/video/workflowContract.ts), built from injected dependencies. Each one is
 * safe to run more than once: projections move forward only, events and ledger entries carry idempotency keys,
 * storage writes replace. Provider rejections (4xx) are thrown as non-retryable ApplicationFailures (type
 * ProviderRejected); everything else is retried by the workflow's retry policies. Submission is in
 * ./videoSubmit.ts, the copy of results in ./videoCopy.ts.
 */

export interface VideoActivityDeps {
  db: Db;
  storage: Storage;
  catalog: Catalog;
  providers: VideoProviders;
  /** Deployment selection and cooldowns (default: one of its own, with the ROUTING_* settings). */
  router?: ModelRouter;
  logger?: Logger;
}

/** The activities under their registered names (the names recorded in workflow histories: never renamed). */
export function createVideoActivities(deps: VideoActivityDeps): VideoActivities {
  const x: VideoActivityContext = {
    ...deps,
    router: deps.router ?? new ModelRouter(deps.catalog, loadRoutingSettings()),
  };
  return {
    submitVideo: (a) => submitVideo(x, a),
    pollVideo: (a) => pollVideo(x, a),
    markProcessing: (a) => markProcessing(x, a),
    copyResult: (a) => copyResult(x, a),
    cancelProviderTask: (a) => cancelProviderTask(x, a),
    observeProviderTask: (a) => observeProviderTask(x, a),
    completeJob: (a) => completeJob(x, a),
    finishUnsuccessful: (a) => finishUnsuccessful(x, a),
  };
}

/** One look at the provider task. A video that came inline (already in memory) is stored now, not passed on. */
async function pollVideo(x: VideoActivityContext, a: TaskArgs): Promise<PollOutcome> {
  const job = await loadJob(x, a.jobId);
  let s;
  try {
    s = await adapterOf(x, job).adapter.poll(a.taskId, { signal: Context.current().cancellationSignal });
  } catch (e) {
    throw toFailure(e, 'polling the provider');
  }
  const out: PollOutcome = {
    state: s.state,
    videoUrl: s.videoUrl,
    lastFrameUrl: s.lastFrameUrl,
    durationSeconds: s.durationSeconds,
    resolution: s.resolution,
    generateAudio: s.generateAudio,
    tier: s.tier,
    errorMessage: s.error?.message,
    errorCode: s.error?.code,
    contentFiltered: s.contentFiltered,
    cancelRequested: job.cancelRequestedAt !== null || undefined,
  };
  if (s.state === 'succeeded' && s.inlineVideo) {
    await storeInlineVideo(x, a.jobId, Buffer.from(s.inlineVideo.base64, 'base64'));
    out.videoStored = true;
  }
  return out;
}

async function storeInlineVideo(x: VideoActivityContext, jobId: string, bytes: Buffer): Promise<void> {
  const key = videoKeyOf(jobId);
  const stored = await x.storage.put(key, Readable.from([bytes]), 'video/mp4');
  await jobs.transition(
    x.db,
    jobId,
    null,
    { videoKey: key, videoSize: stored.size, videoEtag: stored.etag },
    { kind: 'video_copied', data: { bytes: stored.size, inline: true } },
  );
}

async function markProcessing(x: VideoActivityContext, a: JobArgs): Promise<void> {
  await jobs.transition(x.db, a.jobId, 'processing', {}, { kind: 'processing' });
}

/** Best effort: asks the provider to cancel (Seedance cancels queued tasks; Veo has no cancel). */
async function cancelProviderTask(x: VideoActivityContext, a: TaskArgs): Promise<boolean> {
  const job = await loadJob(x, a.jobId);
  let cancelled: boolean;
  try {
    cancelled = await adapterOf(x, job).adapter.cancel(a.taskId);
  } catch (e) {
    throw toFailure(e, 'cancelling at the provider');
  }
  if (cancelled) await jobs.appendEvent(x.db, a.jobId, 'provider_task_cancelled', null, { taskId: a.taskId });
  return cancelled;
}

/**
 * One look at a task that outlived its job (the provider could not cancel it). When it has ended, or on the
 * `last` look, records how (`provider_task_ended`: state and duration) and what it cost the gateway (a gateway
 * cost, src/billing/gatewayCosts.ts: priced as a twin is, from what the provider reports it delivered), in one
 * commit: nobody is charged for it.
 */
async function observeProviderTask(x: VideoActivityContext, a: ObserveArgs): Promise<VideoTaskState | 'unknown'> {
  const job = await loadJob(x, a.jobId);
  let state: VideoTaskState | 'unknown';
  let delivered: TwinDelivery = {};
  try {
    const s = await adapterOf(x, job).adapter.poll(a.taskId, { signal: Context.current().cancellationSignal });
    state = s.state;
    delivered = {
      durationSeconds: s.durationSeconds,
      resolution: s.resolution,
      generateAudio: s.generateAudio,
      tier: s.tier,
    };
  } catch (e) {
    if (!(e instanceof VideoProviderError) || e.retryable) throw toFailure(e, 'polling the provider');
    state = 'unknown'; // the provider no longer knows the task
  }
  if (a.last || (state !== 'queued' && state !== 'running')) {
    const cost = taskGatewayCost(
      {
        cause: 'video_task_uncancelled',
        jobId: job.id,
        accountId: job.accountId,
        model: job.model,
        deployment: job.deployment,
        taskId: a.taskId,
        state,
      },
      delivered,
      job,
    );
    const durationSeconds = delivered.durationSeconds ?? null;
    await recordTaskEnd(
      x.db,
      a.jobId,
      { taskId: a.taskId, state, durationSeconds },
      `${a.jobId}:provider_task_ended`,
      cost,
    );
  }
  return state;
}

/**
 * Charges the actual cost, releases the rest of the hold and marks the job completed: one transaction. A job that
 * kept its prices is billed the seconds delivered at the price of what was delivered (its price table, at the
 * version it was held at); a job of an older build at its one price per second. What the hold covers is charged
 * from it; the rest is collected from free funds or recorded as the job's shortfall (video/repo.ts endJob).
 */
async function completeJob(x: VideoActivityContext, a: CompleteArgs): Promise<CompleteOutcome> {
  const job = await loadJob(x, a.jobId);
  let chargeVnd = a.chargeVnd;
  let billVnd = a.durationSeconds * job.pricePerSecond;
  let billed: jobs.VideoBilled | undefined;
  if (job.pricing) {
    const d = a.delivered ?? {};
    const dims = deliveredDims(askedDims(job.request), {
      resolution: d.resolution,
      audio: d.generateAudio,
      tier: d.tier,
    });
    const pricePerSecond = videoSecondPrice(job.pricing, dims);
    billVnd = pricePerSecond * a.durationSeconds;
    chargeVnd = Math.min(billVnd, job.maxCostVnd);
    billed = {
      seconds: a.durationSeconds,
      resolution: dims.resolution ?? null,
      audio: dims.audio ?? null,
      tier: dims.tier ?? null,
      input: dims.input ?? null,
      pricePerSecond,
      priceVersion: job.pricing.priceVersion ?? null,
    };
  }
  await jobs.endJob(
    x.db,
    { ...a, apiKeyId: job.apiKeyId },
    { status: 'completed', chargeVnd, durationSeconds: a.durationSeconds, billVnd, billed },
  );
  return { costVnd: chargeVnd };
}

/**
 * Releases the whole hold and marks the job failed or expired (one transaction), then removes the input images
 * kept for the provider: a job that ended unsuccessfully never sends them again.
 */
async function finishUnsuccessful(x: VideoActivityContext, a: EndUnsuccessfulArgs): Promise<void> {
  // The job's message is shown to the client: no provider ids or upstream names; the log keeps the original.
  const message = redactorFor(x.catalog)(a.message);
  if (message !== a.message)
    x.logger?.warn(
      { jobId: a.jobId, status: a.status, code: a.code, detail: a.message },
      'video job ended unsuccessfully',
    );
  await jobs.endJob(x.db, a, { status: a.status, message, code: a.code });
  await deleteStoredImages(x.storage, (await loadJob(x, a.jobId)).request.images);
}
