import { createHash } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';

/** Hashes and counts bytes as they pass, so put() never holds more than one chunk. */
export class DigestCounter extends Transform {
  private readonly hash = createHash('md5');
  bytes = 0;
  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.hash.update(chunk);
    this.bytes += chunk.length;
    cb(null, chunk);
  }
  /** Quoted hex MD5, the same form S3 gives a single-part object. */
  etag(): string {
    return `"${this.hash.digest('hex')}"`;
  }
}
