import { randomBytes } from 'node:crypto';
import type { Queryable } from '../db';

/** The files repository: metadata rows of what is in blob storage, per account (another account's id is absent). */

export type FilePurpose = 'batch' | 'batch_output';

export interface StoredFile {
  id: string;
  accountId: string;
  purpose: FilePurpose;
  filename: string;
  bytes: number;
  storageKey: string;
  lineCount: number | null;
  model: string | null;
  endpoint: string | null;
  createdAt: Date;
  /** 30 days after upload (migration 145); past it the file is gone for its account. */
  expiresAt: Date;
}

export const newFileId = () => `file-${randomBytes(12).toString('hex')}`;
/** Storage keys are random (never the client's name): the row maps an id to its key. */
export const newStorageKey = () => `files/${randomBytes(16).toString('hex')}.jsonl`;
export const FILE_ID = /^file-[0-9a-f]{24}$/;

function toFile(r: Record<string, any>): StoredFile {
  return {
    id: r.id,
    accountId: r.account_id,
    purpose: r.purpose,
    filename: r.filename,
    bytes: Number(r.bytes),
    storageKey: r.storage_key,
    lineCount: r.line_count,
    model: r.model,
    endpoint: r.endpoint,
    createdAt: r.created_at,
    expiresAt: r.expires_at,
  };
}

export async function insertFile(db: Queryable, f: Omit<StoredFile, 'createdAt' | 'expiresAt'>): Promise<StoredFile> {
  const r = await db.query(
    `INSERT INTO files (id, account_id, purpose, filename, bytes, storage_key, line_count, model, endpoint)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
     ON CONFLICT (id) DO UPDATE SET id = EXCLUDED.id RETURNING *`,
    [f.id, f.accountId, f.purpose, f.filename, f.bytes, f.storageKey, f.lineCount, f.model, f.endpoint],
  );
  return toFile(r.rows[0]);
}

export async function getFileForAccount(db: Queryable, accountId: string, id: string): Promise<StoredFile | null> {
  if (!FILE_ID.test(id)) return null;
  const r = await db.query(
    'SELECT * FROM files WHERE id = $1 AND account_id = $2 AND deleted_at IS NULL AND expires_at > now()',
    [id, accountId],
  );
  return r.rowCount ? toFile(r.rows[0]) : null;
}

export interface FileListOptions {
  purpose?: string;
  limit: number;
  after?: string;
  order: 'asc' | 'desc';
}

export async function listFiles(
  db: Queryable,
  accountId: string,
  o: FileListOptions,
): Promise<{ files: StoredFile[]; hasMore: boolean }> {
  const cmp = o.order === 'desc' ? '<' : '>';
  const dir = o.order === 'desc' ? 'DESC' : 'ASC';
  const r = await db.query(
    `SELECT f.* FROM files f
     WHERE f.account_id = $1 AND f.deleted_at IS NULL AND f.expires_at > now() AND ($2::text IS NULL OR f.purpose = $2)
       AND ($4::text IS NULL
            OR (f.created_at, f.id) ${cmp} (SELECT created_at, id FROM files WHERE id = $4 AND account_id = $1))
     ORDER BY f.created_at ${dir}, f.id ${dir} LIMIT $3`,
    [accountId, o.purpose ?? null, o.limit + 1, o.after ?? null],
  );
  const rows = r.rows.map(toFile);
  return { files: rows.slice(0, o.limit), hasMore: rows.length > o.limit };
}

/** Marks the file deleted (its bytes are removed by the caller); false when it was not there. */
export async function markDeleted(db: Queryable, accountId: string, id: string): Promise<StoredFile | null> {
  const r = await db.query(
    `UPDATE files SET deleted_at = now() WHERE id = $1 AND account_id = $2 AND deleted_at IS NULL RETURNING *`,
    [id, accountId],
  );
  return r.rowCount ? toFile(r.rows[0]) : null;
}

/** The file as OpenAI shows it. */
export function fileView(f: StoredFile): Record<string, unknown> {
  return {
    id: f.id,
    object: 'file',
    bytes: f.bytes,
    created_at: Math.floor(f.createdAt.getTime() / 1000),
    filename: f.filename,
    purpose: f.purpose,
    status: 'processed',
    status_details: null,
    expires_at: Math.floor(f.expiresAt.getTime() / 1000),
  };
}

/** Whether a batch that has not ended reads this file. */
export async function inUseByOpenBatch(db: Queryable, fileId: string): Promise<boolean> {
  const r = await db.query(
    `SELECT 1 FROM batches WHERE input_file_id = $1
       AND status IN ('validating', 'in_progress', 'finalizing', 'cancelling') LIMIT 1`,
    [fileId],
  );
  return (r.rowCount ?? 0) > 0;
}
