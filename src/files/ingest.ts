import { PassThrough, Writable } from 'node:stream';
import type { Storage, StoredObject } from '../storage';
import { BatchInputValidator, type BatchRequestLine, type InputProblem } from './batchInput';
import { newStorageKey } from './repo';

/**
 * Where an uploaded file's bytes go as the multipart parser reads them: through the batch-input validator into
 * blob storage, with backpressure end to end (a write is acknowledged once storage took it), so a 200 MB upload
 * holds a few chunks in memory and touches no temp file. After the first problem the rest is read and dropped;
 * the caller refuses the upload and deletes what was stored.
 */
export class BatchFileIngest extends Writable {
  readonly validator: BatchInputValidator;
  readonly key = newStorageKey();
  readonly stored: Promise<StoredObject>;
  private readonly body = new PassThrough();

  constructor(
    private readonly storage: Storage,
    maxBytes: number,
    check?: (r: BatchRequestLine, no: number) => InputProblem | null,
  ) {
    // Not destroyed on finish: a destroy means the parser abandoned the upload (see _destroy).
    super({ autoDestroy: false });
    this.validator = new BatchInputValidator(maxBytes, check);
    // put() sees a destroyed body through its own pipeline; the stream's error event needs no other listener.
    this.body.on('error', () => undefined);
    this.stored = storage.put(this.key, this.body, 'application/jsonl');
    // A storage failure ends the upload (the parser sees this stream's error) rather than leave a write waiting.
    this.stored.catch((e) => this.destroy(e as Error));
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (e?: Error | null) => void): void {
    this.validator.push(chunk);
    if (this.validator.problem) return cb();
    if (this.body.write(chunk)) cb();
    else this.body.once('drain', () => cb());
  }

  override _final(cb: (e?: Error | null) => void): void {
    this.validator.end();
    this.body.end();
    this.stored.then(
      () => cb(),
      (e: Error) => cb(e),
    );
  }

  /** The parser abandoned the upload (a refused form, a dropped connection): nothing of it is kept. */
  override _destroy(err: Error | null, cb: (e?: Error | null) => void): void {
    if (!this.body.destroyed && !this.body.writableFinished) this.body.destroy(err ?? new Error('upload aborted'));
    void this.discard(this.storage);
    cb(err);
  }

  /** Deletes what was stored, once storing has ended either way. */
  async discard(storage: Storage): Promise<void> {
    await this.stored.catch(() => undefined);
    await storage.delete(this.key).catch(() => undefined);
  }
}
