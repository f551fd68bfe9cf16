import type { Readable } from 'node:stream';

/** Blob storage for video results. Implementations: fs (default) and S3-compatible. Bodies are streamed. */
export interface StoredObject {
  size: number;
  etag: string;
  contentType: string;
}
export interface Storage {
  put(key: string, body: Readable, contentType: string): Promise<StoredObject>;
  head(key: string): Promise<StoredObject | null>;
  /** Inclusive byte range, as in HTTP Range. */
  get(key: string, range?: { start: number; end: number }): Promise<Readable>;
  delete(key: string): Promise<void>;
}
