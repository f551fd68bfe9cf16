import { Transform, type TransformCallback } from 'node:stream';
import { Readable } from 'node:stream';
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { Db } from '../src/db/pool';
import type { Storage } from '../src/storage/storage';
import type { Catalog } from '../src/catalog/catalog';
import { redactorFor } from '../src/catalog/redact';
import type { Logger } from '../src/observability/logger';
import type { VideoProviders } from '../src/providers/video';
import { ModelRouter } from '../src/routing/modelRouter';
import { loadRoutingSettings } from '../src/routing/settings';
import { VideoProviderError, type VideoImage, type VideoTaskState } from '../src/providers/video/types';
import * as jobs from '../src/video/jobs';
import type { VideoImages } from '../src/video/params';
import type { StoredImageRef } from '../src/video/jobs';
import { deleteStoredImages } from '../src/video/images';
import { detectImageType } from '../src/video/fetchImage';
import type {
  CompleteArgs,
  CopyArgs,
  CopyOutcome,
  EndUnsuccessfulArgs,
  JobArgs,
  ObserveArgs,
  PollOutcome,
  SubmitArgs,
  SubmitOutcome,
  TaskArgs,
  VideoActivities,
} from '../src/video/workflowContract';

/**
 * The video workflow's activities, built from injected dependencies. Each one is safe to run more than once:
 * projections move forward only, events and ledger entries carry idempotency keys, storage writes replace.
 * Provider rejections (4xx) are thrown as non-retryable ApplicationFailures (type ProviderRejected); everything
 * else is retried by the workflow's retry policies.
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

export const videoKeyOf = (jobId: string) => `videos/${jobId}/video.mp4`;
export const lastFrameKeyOf = (jobId: string) => `videos/${jobId}/last-frame`;

const MAX_IMAGE_BYTES = 10 * 1024 * 1024;

function toFailure(e: unknown, what: string): Error {
  if (e instanceof VideoProviderError) {
    if (!e.retryable)
      return ApplicationFailure.nonRetryable(e.message, 'ProviderRejected', { status: e.status, code: e.code });
    return ApplicationFailure.retryable(e.message, 'ProviderUnavailable', { status: e.status, code: e.code });
  }
  if (e instanceof ApplicationFailure) return e;
  return ApplicationFailure.retryable(`${what}: ${e instanceof Error ? e.message : String(e)}`, 'InternalError');
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
 * Counts bytes, heartbeats progress (at most once a second) and checks the first bytes look like `kind`.
 * `contentType` settles once the first bytes are seen (or the stream ends), before any byte is passed on, so
 * storage is told the type the bytes have (a last frame may be PNG, JPEG or WebP).
 */
class CopyMeter extends Transform {
  bytes = 0;
  private lastBeat = 0;
  private head = Buffer.alloc(0);
  private settle!: { resolve: (type: string) => void; reject: (e: Error) => void };
  readonly contentType = new Promise<string>((resolve, reject) => {
    this.settle = { resolve, reject };
  });
  // The activity context is captured up front: stream callbacks may run outside its async context.
  constructor(
    private readonly kind: 'video' | 'last_frame',
    private readonly ctx: Context,
  ) {
    super();
    this.contentType.catch(() => undefined); // also reported through the stream's own error
    this.once('error', (e) => this.settle.reject(e));
  }
  /** The type the first bytes show: MP4 for the video, PNG/JPEG/WebP for a last frame; null when they are neither. */
  private typeOfHead(): string | null {
    if (this.kind === 'video') return this.head.toString('latin1', 4, 8) === 'ftyp' ? 'video/mp4' : null;
    return detectImageType(this.head);
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    if (this.head.length < 16) {
      this.head = Buffer.concat([this.head, chunk.subarray(0, 16 - this.head.length)]);
      if (this.head.length >= 12) {
        const type = this.typeOfHead();
        const what = this.kind === 'video' ? 'video is not an MP4' : 'last frame is not a PNG/JPEG/WebP image';
        if (!type) return cb(new Error(`the provider's ${what}`));
        this.settle.resolve(type);
      }
    }
    this.bytes += chunk.length;
    const now = Date.now();
    if (now - this.lastBeat >= 1000) {
      this.lastBeat = now;
      this.ctx.heartbeat({ bytes: this.bytes });
    }
    cb(null, chunk);
  }
  override _flush(cb: TransformCallback): void {
    // Fewer than 12 bytes: left to the size checks after the copy (an empty result is retried).
    this.settle.resolve(this.typeOfHead() ?? (this.kind === 'video' ? 'video/mp4' : 'image/png'));
    cb();
  }
}

export function createVideoActivities(deps: VideoActivityDeps): VideoActivities {
  const { db, storage, catalog, providers } = deps;

  async function load(jobId: string): Promise<jobs.VideoJob> {
    const job = await jobs.getJob(db, jobId);
    if (!job) throw ApplicationFailure.nonRetryable(`video job ${jobId} not found`, 'JobNotFound');
    return job;
  }
  // Health of the video deployments as this worker sees it (submissions fall back across a model's deployments).
  const router = deps.router ?? new ModelRouter(catalog, loadRoutingSettings());
  /** The job's adapter: the deployment that accepted its task if it has one (polling, copying, cancelling stay there). */
  function adapterOf(job: jobs.VideoJob) {
    const model = catalog.get(job.model);
    const d = model ? router.deployment(model, job.deployment) : null;
    if (d) return { adapter: providers.forDeployment(d), upstreamModel: d.upstreamModel };
    const provider = model ? model.provider : job.provider;
    return { adapter: providers.get(provider), upstreamModel: model?.upstreamModel ?? job.model };
  }

  return {
    /**
     * Submits the job to its provider once: a job that already has a provider task id resumes with it. A job
     * whose deadline (`notAfter`, epoch ms) passed before it was submitted is not submitted at all.
     */
    async submitVideo(a: SubmitArgs): Promise<SubmitOutcome> {
      const job = await load(a.jobId);
      if (jobs.isFinal(job.status)) return { taskId: job.providerTaskId, alreadyFinal: true };
      if (job.cancelRequestedAt) return { taskId: job.providerTaskId, cancelRequested: true };
      if (job.providerTaskId) return { taskId: job.providerTaskId };
      if (a.notAfter !== undefined && Date.now() >= a.notAfter) return { taskId: null, pastDeadline: true };
      const { images: stored, ...params } = job.request;
      const images: VideoImages<VideoImage> = {};
      try {
        if (stored.inputReference) images.inputReference = await readImage(storage, stored.inputReference);
        if (stored.lastFrame) images.lastFrame = await readImage(storage, stored.lastFrame);
        if (stored.referenceImages?.length)
          images.referenceImages = await Promise.all(stored.referenceImages.map((x) => readImage(storage, x)));
      } catch (e) {
        throw toFailure(e, 'reading input images');
      }
      const model = catalog.get(job.model);
      let accepted: { taskId: string; provider: string; deployment: string | null };
      try {
        const signal = Context.current().cancellationSignal;
        if (!model) {
          // A model no longer in the catalog: its recorded provider, as before deployments.
          const { adapter, upstreamModel } = adapterOf(job);
          accepted = {
            ...(await adapter.submit({ ...params, upstreamModel, images }, { signal })),
            provider: adapter.id,
            deployment: null,
          };
        } else {
          // A transient failure moves on to another deployment of the same model (never another model); when none
          // is left the activity fails retryably and Temporal tries again later, as before.
          accepted = await router.run(
            model,
            async (t) => {
              const adapter = providers.forDeployment(t.deployment);
              const r = await adapter.submit(
                { ...params, upstreamModel: t.deployment.upstreamModel, images },
                { signal },
              );
              return { taskId: r.taskId, provider: adapter.id, deployment: t.deployment.id };
            },
            null,
            true,
          );
        }
      } catch (e) {
        throw toFailure(e, 'submitting to the provider');
      }
      const { taskId } = accepted;
      // Recorded even if the job ended meanwhile (a cancel): the workflow then cancels or follows the task.
      const rec = await jobs.recordProviderTask(db, a.jobId, taskId, accepted.deployment, {
        provider: accepted.provider,
        deployment: accepted.deployment,
        taskId,
      });
      if (rec.taskId !== taskId) {
        // A second attempt ran alongside the first (a timed-out attempt still running): one task is the job's.
        deps.logger?.warn(
          { jobId: a.jobId, taskId, kept: rec.taskId },
          'a duplicate provider task was created; cancelling it',
        );
        await adapterOf(job)
          .adapter.cancel(taskId)
          .catch(() => false);
      }
      return {
        taskId: rec.taskId,
        alreadyFinal: jobs.isFinal(rec.status) || undefined,
        cancelRequested: rec.cancelRequested || undefined,
      };
    },

    async pollVideo(a: TaskArgs): Promise<PollOutcome> {
      const job = await load(a.jobId);
      const { adapter } = adapterOf(job);
      let s;
      try {
        s = await adapter.poll(a.taskId, { signal: Context.current().cancellationSignal });
      } catch (e) {
        throw toFailure(e, 'polling the provider');
      }
      const out: PollOutcome = {
        state: s.state,
        videoUrl: s.videoUrl,
        lastFrameUrl: s.lastFrameUrl,
        durationSeconds: s.durationSeconds,
        errorMessage: s.error?.message,
        errorCode: s.error?.code,
        contentFiltered: s.contentFiltered,
        cancelRequested: job.cancelRequestedAt !== null || undefined,
      };
      if (s.state === 'succeeded' && s.inlineVideo) {
        // The bytes came inline (already in memory): store them now rather than pass them through Temporal.
        const stored = await storage.put(
          videoKeyOf(a.jobId),
          Readable.from([Buffer.from(s.inlineVideo.base64, 'base64')]),
          'video/mp4',
        );
        await jobs.transition(
          db,
          a.jobId,
          null,
          { videoKey: videoKeyOf(a.jobId), videoSize: stored.size, videoEtag: stored.etag },
          { kind: 'video_copied', data: { bytes: stored.size, inline: true } },
        );
        out.videoStored = true;
      }
      return out;
    },

    async markProcessing(a: JobArgs): Promise<void> {
      await jobs.transition(db, a.jobId, 'processing', {}, { kind: 'processing' });
    },

    /**
     * Streams a result from the provider into our storage (never buffered whole), heartbeating progress. The
     * stored object replaces any partial earlier attempt, so a retry simply starts over.
     */
    async copyResult(a: CopyArgs): Promise<CopyOutcome> {
      const job = await load(a.jobId);
      if (jobs.isFinal(job.status))
        throw ApplicationFailure.nonRetryable(`video job ${a.jobId} is already ${job.status}`, 'JobFinal');
      const { adapter } = adapterOf(job);
      const ctx = Context.current();
      const key = a.variant === 'video' ? videoKeyOf(a.jobId) : lastFrameKeyOf(a.jobId);
      ctx.heartbeat({ bytes: 0 });
      let download;
      try {
        download = await adapter.download(a.url, { signal: ctx.cancellationSignal });
      } catch (e) {
        throw toFailure(e, `downloading the ${a.variant}`);
      }
      const meter = new CopyMeter(a.variant, ctx);
      const source = download.body;
      const abort = () => source.destroy(new Error('copy cancelled'));
      ctx.cancellationSignal.addEventListener('abort', abort, { once: true });
      // pipe() keeps backpressure (memory stays at a few chunks); errors are forwarded by hand so put() sees them.
      source.on('error', (e) => meter.destroy(e));
      source.pipe(meter);
      let stored;
      let contentType;
      try {
        contentType = await meter.contentType;
        stored = await storage.put(key, meter, contentType);
      } catch (e) {
        source.destroy();
        throw toFailure(e, `copying the ${a.variant}`);
      } finally {
        ctx.cancellationSignal.removeEventListener('abort', abort);
      }
      if (download.contentLength !== null && stored.size !== download.contentLength) {
        throw ApplicationFailure.retryable(
          `copied ${stored.size} bytes of the ${a.variant} but the provider announced ${download.contentLength}`,
          'IncompleteCopy',
        );
      }
      if (stored.size === 0)
        throw ApplicationFailure.retryable(`the provider's ${a.variant} is empty`, 'IncompleteCopy');
      const patch: jobs.JobPatch =
        a.variant === 'video'
          ? { videoKey: key, videoSize: stored.size, videoEtag: stored.etag }
          : {
              lastFrameKey: key,
              lastFrameSize: stored.size,
              lastFrameEtag: stored.etag,
              lastFrameContentType: contentType,
            };
      await jobs.transition(db, a.jobId, null, patch, {
        kind: a.variant === 'video' ? 'video_copied' : 'last_frame_copied',
        data: { bytes: stored.size },
      });
      return { key, size: stored.size, etag: stored.etag };
    },

    /** Best effort: asks the provider to cancel (Seedance cancels queued tasks; Veo has no cancel). */
    async cancelProviderTask(a: TaskArgs): Promise<boolean> {
      const job = await load(a.jobId);
      let cancelled: boolean;
      try {
        cancelled = await adapterOf(job).adapter.cancel(a.taskId);
      } catch (e) {
        throw toFailure(e, 'cancelling at the provider');
      }
      if (cancelled) await jobs.appendEvent(db, a.jobId, 'provider_task_cancelled', null, { taskId: a.taskId });
      return cancelled;
    },

    /**
     * One look at a task that outlived its job (the provider could not cancel it). When it has ended, or on the
     * `last` look, records how (`provider_task_ended`: state and duration), so what it cost us is known.
     */
    async observeProviderTask(a: ObserveArgs): Promise<VideoTaskState | 'unknown'> {
      const job = await load(a.jobId);
      let state: VideoTaskState | 'unknown';
      let durationSeconds: number | null = null;
      try {
        const s = await adapterOf(job).adapter.poll(a.taskId, { signal: Context.current().cancellationSignal });
        state = s.state;
        durationSeconds = s.durationSeconds ?? null;
      } catch (e) {
        if (!(e instanceof VideoProviderError) || e.retryable) throw toFailure(e, 'polling the provider');
        state = 'unknown'; // the provider no longer knows the task
      }
      if (a.last || (state !== 'queued' && state !== 'running')) {
        await jobs.appendEvent(db, a.jobId, 'provider_task_ended', null, { taskId: a.taskId, state, durationSeconds });
      }
      return state;
    },

    async completeJob(a: CompleteArgs): Promise<void> {
      await jobs.endJob(db, a, { status: 'completed', chargeVnd: a.chargeVnd, durationSeconds: a.durationSeconds });
    },

    async finishUnsuccessful(a: EndUnsuccessfulArgs): Promise<void> {
      // The job's message is shown to the client: no provider ids or upstream names; the log keeps the original.
      const message = redactorFor(catalog)(a.message);
      if (message !== a.message)
        deps.logger?.warn(
          { jobId: a.jobId, status: a.status, code: a.code, detail: a.message },
          'video job ended unsuccessfully',
        );
      await jobs.endJob(db, a, { status: a.status, message, code: a.code });
      // The input images were kept for the provider; a job that ended unsuccessfully never sends them again.
      await deleteStoredImages(storage, (await load(a.jobId)).request.images);
    },
  };
}
