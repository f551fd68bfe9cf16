import type { Span } from '@opentelemetry/api';
import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import type { Client } from '@temporalio/client';
import type { Catalog } from '../../catalog';
import type { Config } from '../../config';
import type { Db } from '../../db';
import { ApiError, budgetExceeded, insufficientFunds } from '../../errors';
import type { Logger, Metrics } from '../../observability';
import type { Storage } from '../../storage';
import { getBalance, InsufficientFunds, BudgetExceeded } from '../../billing';
import * as jobs from './repo';
import type { StoredImageRef, VideoJob } from './repo';
import { deleteStoredImages, imageExtension } from './images';
import type { VideoImages } from '../../providers';
import { startVideoWorkflow } from './start';
import { loadImages, validateVideoRequest, type ImageLoader, type LoadedImage } from './validate';

/**
 * Submitting a video job (POST /v1/videos; docs/video-jobs.md): validate, refuse early without funds, load
 * the images, store them, place the hold and create the job in one transaction, start the workflow. No job without
 * a hold, no hold without a job: a workflow that cannot be started releases the hold and fails the job; a crash in
 * between is repaired by the reconciler (./reconciler.ts).
 */

export interface VideoServiceDeps {
  config: Config;
  db: Db;
  catalog: Catalog;
  storage: Storage;
  logger: Logger;
  metrics: Metrics;
  /** Null when the API runs without Temporal: video jobs are then refused with 503. */
  temporal: Client | null;
}

export interface VideoJobRequest {
  accountId: string;
  apiKeyId: string | null;
  body: Record<string, unknown>;
  /** The body came from a multipart form (all values strings). */
  fromForm: boolean;
  idempotencyKey: string | null;
  /** SHA-256 of the request: a retry with the same Idempotency-Key must carry the same request. */
  requestHash: string;
  /** Told the model as soon as it is known, so the request log names it even when the submission fails later. */
  onModel?: (modelId: string) => void;
  /** The key's rate limit, checked once the request is valid and before any money or image is touched. */
  admit?: () => Promise<void>;
  /** The request's span while tracing is on: the job's workflow continues its trace. */
  trace?: Span;
}

/** The job, and whether it is an earlier one returned again for the same Idempotency-Key. */
export interface SubmittedVideoJob {
  job: VideoJob;
  replayed: boolean;
}

export async function submitVideoJob(
  deps: VideoServiceDeps,
  req: VideoJobRequest,
  loadImage: ImageLoader,
): Promise<SubmittedVideoJob> {
  const replay = (existing: VideoJob): SubmittedVideoJob => {
    if (existing.requestHash !== req.requestHash)
      throw new ApiError(
        409,
        'This Idempotency-Key was already used with a different request body.',
        'invalid_request_error',
        'Idempotency-Key',
        'idempotency_key_reused',
      );
    return { job: existing, replayed: true };
  };
  if (req.idempotencyKey) {
    const existing = await jobs.findByIdempotencyKey(deps.db, req.accountId, req.idempotencyKey);
    if (existing) return replay(existing);
  }

  const v = validateVideoRequest(req.body, deps.catalog, req.fromForm);
  const { images: sources, ...params } = v.request;
  req.onModel?.(v.model.id);
  const client = temporalClient(deps);
  await req.admit?.();
  // Cheap early refusal before any image is fetched or stored; the hold below is the authoritative check.
  const balance = await getBalance(deps.db, req.accountId);
  if (balance && balance.available < v.maxCostVnd) throw insufficientFunds(v.maxCostVnd, balance.available);
  const jobId = randomUUID();
  const images = await storeInputImages(deps.storage, jobId, await loadImages(sources, loadImage));

  let job: VideoJob;
  try {
    job = await jobs.createJobWithHold(deps.db, {
      id: jobId,
      accountId: req.accountId,
      apiKeyId: req.apiKeyId,
      model: v.model.id,
      provider: v.model.provider,
      request: { ...params, images },
      requestHash: req.requestHash,
      idempotencyKey: req.idempotencyKey,
      seconds: params.seconds,
      pricePerSecond: v.holdPricePerSecond,
      // The prices in force now (their version included): the job is charged at them whenever it completes.
      pricing: v.model.pricing,
      maxCostVnd: v.maxCostVnd,
      holdId: randomUUID(),
    });
  } catch (e) {
    // Nothing was created: drop the stored input images.
    await deleteStoredImages(deps.storage, images);
    if (e instanceof InsufficientFunds) throw insufficientFunds(e.needed, e.available);
    if (e instanceof BudgetExceeded) {
      deps.metrics.limitRefusals.inc({ limit: 'budget' });
      throw budgetExceeded(e.needed, e.room, e.period);
    }
    if (e instanceof jobs.DuplicateIdempotencyKey) return replay(e.existing);
    throw e;
  }
  await startOrCompensate(deps, client, job, req.trace);
  return { job, replayed: false };
}

/** The Temporal client, or the 503 that says why video jobs cannot run in this process. */
export function temporalClient(deps: Pick<VideoServiceDeps, 'temporal' | 'config'>): Client {
  if (!deps.temporal) {
    const why =
      deps.config.temporalAddress === 'off'
        ? 'this API process serves synchronous operations only (TEMPORAL_ADDRESS=off)'
        : 'the job scheduler (Temporal) is not connected';
    throw new ApiError(503, `Video generation is unavailable: ${why}.`, 'server_error', null, 'video_unavailable');
  }
  return deps.temporal;
}

/** Keeps the input images in our storage until the provider has them (the workflow reads them back). */
async function storeInputImages(
  storage: Storage,
  jobId: string,
  images: VideoImages<LoadedImage>,
): Promise<VideoImages<StoredImageRef>> {
  const stored: VideoImages<StoredImageRef> = {};
  const tried: StoredImageRef[] = [];
  const put = async (img: LoadedImage, name: string): Promise<StoredImageRef> => {
    const ref = {
      key: `videos/${jobId}/inputs/${name}.${imageExtension(img.mimeType)}`,
      mimeType: img.mimeType,
      size: img.bytes.length,
    };
    tried.push(ref);
    await storage.put(ref.key, Readable.from([img.bytes]), img.mimeType);
    return ref;
  };
  try {
    if (images.inputReference) stored.inputReference = await put(images.inputReference, 'input_reference');
    if (images.lastFrame) stored.lastFrame = await put(images.lastFrame, 'last_frame');
    if (images.referenceImages)
      stored.referenceImages = await Promise.all(images.referenceImages.map((img, i) => put(img, `reference_${i}`)));
  } catch (e) {
    // No job will ever read them: drop the ones already stored.
    await deleteStoredImages(storage, { referenceImages: tried });
    throw e;
  }
  return stored;
}

/** Starts the job's workflow; if it cannot start, the hold is released and the job fails (503 to the caller). */
async function startOrCompensate(
  deps: VideoServiceDeps,
  client: Client,
  job: VideoJob,
  trace: Span | undefined,
): Promise<void> {
  const jobId = job.id;
  try {
    await startVideoWorkflow(client, deps.config, job, trace);
  } catch (e) {
    // A workflow that did start after all sees the final job and stops before submitting.
    deps.logger.error({ jobId, err: (e as Error).message }, 'could not start video workflow');
    await jobs.endJob(
      deps.db,
      { jobId, holdId: job.holdId },
      {
        status: 'failed',
        message: 'The job could not be scheduled; nothing was charged. Please retry.',
        code: 'scheduling_failed',
      },
    );
    await deleteStoredImages(deps.storage, job.request.images);
    throw new ApiError(
      503,
      'The video job could not be scheduled; nothing was charged. Please retry.',
      'server_error',
      null,
      'video_unavailable',
    );
  }
  // Bookkeeping off the response path: if it is lost, the reconciler records it (its start finds the workflow).
  void jobs
    .markWorkflowStarted(deps.db, jobId, 'api')
    .catch((e) => deps.logger.warn({ jobId, err: (e as Error).message }, 'could not record workflow start'));
}
