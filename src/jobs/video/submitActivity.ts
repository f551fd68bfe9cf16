import { Context } from '@temporalio/activity';
import type { Storage } from '../../storage';
import { type VideoImage, type VideoImages, type VideoParams } from '../../providers';
import * as jobs from './repo';
import type { StoredImageRef } from './repo';
import type { SubmitArgs, SubmitOutcome } from './workflowContract';
import { adapterOf, loadJob, toFailure, type VideoActivityContext } from './activityContext';
import { TryRecord } from '../../modelCall';
import { creatorAdapter, duplicateCancelledKey, duplicateKey } from './twins';

/** Activity submitVideo: creating the job's provider task, once. */

const MAX_IMAGE_BYTES = 10 * 1024 * 1024;

interface AcceptedTask {
  taskId: string;
  provider: string;
  /** The deployment that accepted it; null for a model no longer in the catalog. */
  deployment: string | null;
}

/**
 * Submits the job to its provider once: a job that already has a provider task id resumes with it. A job whose
 * deadline (`notAfter`, epoch ms) passed before it was submitted is not submitted at all.
 */
export async function submitVideo(x: VideoActivityContext, a: SubmitArgs): Promise<SubmitOutcome> {
  const job = await loadJob(x, a.jobId);
  if (jobs.isFinal(job.status)) return { taskId: job.providerTaskId, alreadyFinal: true };
  if (job.cancelRequestedAt) return { taskId: job.providerTaskId, cancelRequested: true };
  if (job.providerTaskId) return { taskId: job.providerTaskId };
  if (a.notAfter !== undefined && Date.now() >= a.notAfter) return { taskId: null, pastDeadline: true };
  const { images: stored, ...params } = job.request;
  let images: VideoImages<VideoImage>;
  try {
    images = await readImages(x.storage, stored);
  } catch (e) {
    throw toFailure(e, 'reading input images');
  }
  let accepted: AcceptedTask;
  try {
    accepted = await createTask(x, job, params, images);
  } catch (e) {
    throw toFailure(e, 'submitting to the provider');
  }
  return recordTask(x, job, accepted);
}

async function readImages(storage: Storage, stored: VideoImages<StoredImageRef>): Promise<VideoImages<VideoImage>> {
  const images: VideoImages<VideoImage> = {};
  if (stored.inputReference) images.inputReference = await readImage(storage, stored.inputReference);
  if (stored.lastFrame) images.lastFrame = await readImage(storage, stored.lastFrame);
  if (stored.referenceImages?.length)
    images.referenceImages = await Promise.all(stored.referenceImages.map((x) => readImage(storage, x)));
  return images;
}

async function readImage(storage: Storage, ref: StoredImageRef): Promise<VideoImage> {
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const c of await storage.get(ref.key)) {
    n += (c as Buffer).length;
    if (n > MAX_IMAGE_BYTES * 2) throw new Error(`stored image ${ref.key} is larger than expected`);
    chunks.push(c as Buffer);
  }
  return { base64: Buffer.concat(chunks).toString('base64'), mimeType: ref.mimeType };
}

/**
 * Creates the provider task. A transient failure moves on to another deployment of the same model (never another
 * model); when none is left the activity fails retryably and Temporal tries again later. A model no longer in the
 * catalog goes to its recorded provider.
 */
async function createTask(
  x: VideoActivityContext,
  job: jobs.VideoJob,
  params: VideoParams,
  images: VideoImages<VideoImage>,
): Promise<AcceptedTask> {
  const signal = Context.current().cancellationSignal;
  const model = x.catalog.get(job.model);
  if (!model) {
    const { adapter, upstreamModel } = adapterOf(x, job);
    const r = await adapter.submit({ ...params, upstreamModel, images }, { signal });
    return { taskId: r.taskId, provider: adapter.id, deployment: null };
  }
  const rec = new TryRecord('videos');
  return x.router.run(
    model,
    async (t) => {
      const adapter = x.providers.forDeployment(t.deployment);
      const s = { ...params, upstreamModel: t.deployment.upstreamModel, images };
      const r = await rec.within(() => adapter.submit(s, { signal }));
      return { taskId: r.taskId, provider: adapter.id, deployment: t.deployment.id };
    },
    rec,
    true,
  );
}

/**
 * Records the task, even if the job ended meanwhile (a cancel): the workflow then cancels or follows it. A second
 * attempt that ran alongside the first (a timed-out attempt still running) created a twin: one task is the job's;
 * the other is named in a `provider_task_duplicate` job event and cancelled at the provider that created it
 * (`provider_task_cancelled`), or, where the provider cannot cancel (Veo), followed to its end by the worker's twin
 * sweep (src/jobs/video/twins.ts: `provider_task_ended`).
 */
async function recordTask(x: VideoActivityContext, job: jobs.VideoJob, t: AcceptedTask): Promise<SubmitOutcome> {
  const { taskId } = t;
  const rec = await jobs.recordProviderTask(x.db, job.id, taskId, t.deployment, {
    provider: t.provider,
    deployment: t.deployment,
    taskId,
  });
  if (rec.taskId !== taskId) await dropDuplicate(x, job, t, rec.taskId);
  return {
    taskId: rec.taskId,
    alreadyFinal: jobs.isFinal(rec.status) || undefined,
    cancelRequested: rec.cancelRequested || undefined,
  };
}

async function dropDuplicate(x: VideoActivityContext, job: jobs.VideoJob, t: AcceptedTask, kept: string) {
  const { taskId } = t;
  const at = { taskId, provider: t.provider, deployment: t.deployment, kept };
  await jobs.appendEvent(x.db, job.id, 'provider_task_duplicate', null, at, duplicateKey(job.id, taskId));
  let cancelled = false;
  try {
    cancelled = await creatorAdapter(x, job.model, t).cancel(taskId);
  } catch (e) {
    x.logger?.warn({ jobId: job.id, taskId, err: (e as Error).message }, 'cancelling a duplicate provider task failed');
  }
  if (cancelled)
    await jobs.appendEvent(
      x.db,
      job.id,
      'provider_task_cancelled',
      null,
      { taskId, duplicate: true },
      duplicateCancelledKey(job.id, taskId),
    );
  // Otherwise the worker's twin sweep (src/jobs/video/twins.ts) follows it to its end and records what it cost us.
  else x.logger?.warn(at, 'a duplicate provider task could not be cancelled: it is followed to its end');
}
