import { Readable } from 'node:stream';
import {
  CreateBucketCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  S3Client,
  S3ServiceException,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import type { Storage, StoredObject } from './storage';
import { checkRange, InvalidRangeError, ObjectNotFoundError, validateKey } from './keys';
import { DigestCounter } from './digest';
import { parseContentRange, sliceStream } from './rangeSlice';

export interface S3StorageOptions {
  bucket: string;
  endpoint?: string;
  region: string;
  forcePathStyle: boolean;
  /** Multipart part size in bytes (S3 minimum 5 MiB). Memory per upload is about partSize x (queueSize + 1). */
  partSize?: number;
  /** Parts uploaded in parallel. */
  queueSize?: number;
  /** Extra S3 client settings (tests pass explicit credentials here; normally the standard AWS env vars are used). */
  client?: Partial<S3ClientConfig>;
}

const MiB = 1024 * 1024;

function httpStatus(e: unknown): number | undefined {
  return (e as S3ServiceException)?.$metadata?.httpStatusCode;
}
function errName(e: unknown): string | undefined {
  return (e as { name?: string })?.name;
}

/**
 * S3-compatible storage (AWS S3, MinIO, R2, s3rver...). Uploads stream through lib-storage's multipart Upload,
 * which holds at most queueSize + 1 parts in memory whatever the object's size. Credentials come from the
 * SDK's default chain (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, profiles, instance roles).
 */
export class S3Storage implements Storage {
  readonly client: S3Client;
  private readonly bucket: string;
  private readonly partSize: number;
  private readonly queueSize: number;
  private bucketReady: Promise<void> | null = null;

  constructor(readonly opts: S3StorageOptions) {
    this.bucket = opts.bucket;
    this.partSize = Math.max(5 * MiB, opts.partSize ?? 5 * MiB);
    this.queueSize = Math.max(1, opts.queueSize ?? 2);
    this.client = new S3Client({
      region: opts.region,
      endpoint: opts.endpoint,
      forcePathStyle: opts.forcePathStyle,
      // The SDK's default flexible checksums send aws-chunked bodies with trailers that many S3-compatible
      // servers reject; MD5/ETag integrity is kept, and the checksums are still sent where S3 requires them.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      ...opts.client,
    });
  }

  /** Creates the bucket on first use when it does not exist (dev convenience; production buckets pre-exist). */
  private ensureBucket(): Promise<void> {
    if (!this.bucketReady) {
      this.bucketReady = this.createBucketIfMissing().catch((e) => {
        this.bucketReady = null; // let the next call try again
        throw e;
      });
    }
    return this.bucketReady;
  }

  private async createBucketIfMissing(): Promise<void> {
    try {
      await this.client.send(new HeadBucketCommand({ Bucket: this.bucket }));
      return;
    } catch (e) {
      if (httpStatus(e) !== 404 && errName(e) !== 'NotFound' && errName(e) !== 'NoSuchBucket') throw e;
    }
    try {
      await this.client.send(new CreateBucketCommand({ Bucket: this.bucket }));
    } catch (e) {
      // Another process created it between our HEAD and CREATE.
      if (errName(e) !== 'BucketAlreadyOwnedByYou' && errName(e) !== 'BucketAlreadyExists') throw e;
    }
  }

  async put(key: string, body: Readable, contentType: string): Promise<StoredObject> {
    validateKey(key);
    await this.ensureBucket();
    const counter = new DigestCounter();
    // Errors of the source must reach the upload (pipe alone would leave it waiting forever).
    body.on('error', (e) => counter.destroy(e));
    body.pipe(counter);
    const upload = new Upload({
      client: this.client,
      params: { Bucket: this.bucket, Key: key, Body: counter, ContentType: contentType },
      partSize: this.partSize,
      queueSize: this.queueSize,
      leavePartsOnError: false,
    });
    try {
      const out = await upload.done();
      if (!out.ETag) {
        // Some servers omit the ETag from CompleteMultipartUpload; ask for what was stored.
        const h = await this.head(key);
        if (h) return h;
      }
      return { size: counter.bytes, etag: out.ETag ?? counter.etag(), contentType };
    } catch (e) {
      body.unpipe(counter);
      body.destroy();
      counter.destroy();
      throw e;
    }
  }

  async head(key: string): Promise<StoredObject | null> {
    validateKey(key);
    await this.ensureBucket();
    try {
      const r = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }));
      return {
        size: r.ContentLength ?? 0,
        etag: r.ETag ?? '',
        contentType: r.ContentType ?? 'application/octet-stream',
      };
    } catch (e) {
      if (httpStatus(e) === 404 || errName(e) === 'NotFound' || errName(e) === 'NoSuchKey') return null;
      throw e;
    }
  }

  async get(key: string, range?: { start: number; end: number }): Promise<Readable> {
    validateKey(key);
    if (range) checkRange(key, range);
    await this.ensureBucket();
    try {
      const r = await this.client.send(
        new GetObjectCommand({
          Bucket: this.bucket,
          Key: key,
          Range: range ? `bytes=${range.start}-${range.end}` : undefined,
        }),
      );
      if (!(r.Body instanceof Readable)) throw new Error('S3 GetObject returned no stream body');
      if (!range) return r.Body;
      return exactRange(r.Body, range, parseContentRange(r.ContentRange), r.ContentLength);
    } catch (e) {
      if (httpStatus(e) === 404 || errName(e) === 'NoSuchKey') throw new ObjectNotFoundError(key);
      if (httpStatus(e) === 416 || errName(e) === 'InvalidRange') throw new InvalidRangeError(key, range!);
      throw e;
    }
  }

  async delete(key: string): Promise<void> {
    validateKey(key);
    await this.ensureBucket();
    await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }));
  }
}

/**
 * Makes sure the stream is exactly the requested range (end clamped to the object, as in HTTP): trims when the
 * server sent more than asked (a 200 with the whole body, or a wider 206).
 */
function exactRange(
  body: Readable,
  want: { start: number; end: number },
  got: { first: number; last: number } | null,
  contentLength?: number,
): Readable {
  const first = got ? got.first : 0;
  const last = got ? got.last : (contentLength ?? Number.MAX_SAFE_INTEGER) - 1;
  const end = Math.min(want.end, last);
  if (first === want.start && last === end) return body;
  if (first > want.start) {
    body.destroy();
    throw new Error(`S3 server answered range ${first}-${last} for requested ${want.start}-${want.end}`);
  }
  return sliceStream(body, want.start - first, end - want.start + 1);
}
