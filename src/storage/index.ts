import type { Config } from '../config';
import type { Storage } from './storage';
import { FsStorage } from './fsStorage';

/** Picks the storage driver from config (fs by default; s3 for production). */
export function createStorage(config: Config): Storage {
  if (config.storageDriver === 's3') {
    // Loaded lazily so the AWS SDK is only paid for when used.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { S3Storage } = require('./s3Storage') as typeof import('./s3Storage');
    return new S3Storage(config.s3);
  }
  return new FsStorage(config.storageDir);
}

export { parseRange } from './rangeSlice';
export type { Storage, StoredObject } from './storage';
