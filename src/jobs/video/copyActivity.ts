import { Transform, type TransformCallback } from 'node:stream';
import { ApplicationFailure, Context } from '@temporalio/activity';
import * as jobs from './repo';
import { detectImageType } from './fetchImage';
import type { CopyArgs, CopyOutcome } from './workflowContract';
import {
  adapterOf,
  lastFrameKeyOf,
  loadJob,
  toFailure,
  videoKeyOf,
  type VideoActivityContext,
} from './activityContext';

/** Activity copyResult: a result streamed from the provider into our storage. */

/**
 * Streams a result from the provider into our storage (never buffered whole), heartbeating progress. The stored
 * object replaces any partial earlier attempt, so a retry simply starts over.
 */
export async function copyResult(x: VideoActivityContext, a: CopyArgs): Promise<CopyOutcome> {
  const job = await loadJob(x, a.jobId);
  if (jobs.isFinal(job.status))
    throw ApplicationFailure.nonRetryable(`video job ${a.jobId} is already ${job.status}`, 'JobFinal');
  const key = a.variant === 'video' ? videoKeyOf(a.jobId) : lastFrameKeyOf(a.jobId);
  const { stored, contentType, announced } = await streamToStorage(x, job, a, key);
  if (announced !== null && stored.size !== announced) {
    throw ApplicationFailure.retryable(
      `copied ${stored.size} bytes of the ${a.variant} but the provider announced ${announced}`,
      'IncompleteCopy',
    );
  }
  if (stored.size === 0) throw ApplicationFailure.retryable(`the provider's ${a.variant} is empty`, 'IncompleteCopy');
  const patch: jobs.JobPatch =
    a.variant === 'video'
      ? { videoKey: key, videoSize: stored.size, videoEtag: stored.etag }
      : {
          lastFrameKey: key,
          lastFrameSize: stored.size,
          lastFrameEtag: stored.etag,
          lastFrameContentType: contentType,
        };
  await jobs.transition(x.db, a.jobId, null, patch, {
    kind: a.variant === 'video' ? 'video_copied' : 'last_frame_copied',
    data: { bytes: stored.size },
  });
  return { key, size: stored.size, etag: stored.etag };
}

/** Downloads `a.url` into `key`, with backpressure; a cancel of the activity stops the download. */
async function streamToStorage(x: VideoActivityContext, job: jobs.VideoJob, a: CopyArgs, key: string) {
  const ctx = Context.current();
  ctx.heartbeat({ bytes: 0 });
  let download;
  try {
    download = await adapterOf(x, job).adapter.download(a.url, { signal: ctx.cancellationSignal });
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
  try {
    const contentType = await meter.contentType;
    const stored = await x.storage.put(key, meter, contentType);
    return { stored, contentType, announced: download.contentLength };
  } catch (e) {
    source.destroy();
    throw toFailure(e, `copying the ${a.variant}`);
  } finally {
    ctx.cancellationSignal.removeEventListener('abort', abort);
  }
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
