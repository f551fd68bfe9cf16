import type { Readable } from 'node:stream';
import type { Queryable } from '../db';
import type { Storage } from '../storage';
import type { BatchFileIngest } from './ingest';
import * as files from './repo';

/**
 * The Files API's operations over the files table and storage (src/api/routers/files.ts parses and renders): a
 * validated upload recorded, a file's bytes, a file deleted.
 */

/** Records an upload whose bytes its ingest has stored and validated as a batch input file. */
export async function recordBatchFile(
  db: Queryable,
  accountId: string,
  ingest: BatchFileIngest,
  filename: string,
): Promise<files.StoredFile> {
  const stored = await ingest.stored;
  const v = ingest.validator;
  return files.insertFile(db, {
    id: files.newFileId(),
    accountId,
    purpose: 'batch',
    filename,
    bytes: stored.size,
    storageKey: ingest.key,
    lineCount: v.requests,
    model: v.model,
    endpoint: v.endpoint,
  });
}

/** The file's bytes, streamed from storage. */
export function fileContent(storage: Storage, f: files.StoredFile): Promise<Readable> {
  return storage.get(f.storageKey);
}

/**
 * Marks the file deleted (false: it already was); its bytes go too, unless a batch still reads it as its input
 * (they stay until the batch has ended).
 */
export async function deleteFile(deps: { db: Queryable; storage: Storage }, f: files.StoredFile): Promise<boolean> {
  const gone = await files.markDeleted(deps.db, f.accountId, f.id);
  if (!gone) return false;
  if (!(await files.inUseByOpenBatch(deps.db, f.id))) await deps.storage.delete(f.storageKey).catch(() => undefined);
  return true;
}
