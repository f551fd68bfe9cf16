import type { Db } from '../db';
import type { Storage } from '../storage';

/**
 * Removes from blob storage the bytes of files that are gone for their account (deleted, or past `expires_at`),
 * unless a batch that has not ended still reads them (a file deleted while its batch runs keeps its bytes until the
 * batch ends). Run periodically by the worker. The storage delete comes first and is idempotent, so a sweep cut short
 * only repeats a delete; the row records when the bytes went and is never removed (batches name their files).
 */
export async function sweepFileBytes(db: Db, storage: Storage, opts: { limit?: number } = {}): Promise<number> {
  const r = await db.query(
    `SELECT f.id, f.storage_key FROM files f
     WHERE f.bytes_removed_at IS NULL AND (f.deleted_at IS NOT NULL OR f.expires_at <= now())
       AND NOT EXISTS (SELECT 1 FROM batches b WHERE b.input_file_id = f.id
                         AND b.status IN ('validating', 'in_progress', 'finalizing', 'cancelling'))
     ORDER BY f.expires_at LIMIT $1`,
    [opts.limit ?? 500],
  );
  let removed = 0;
  for (const row of r.rows as { id: string; storage_key: string }[]) {
    await storage.delete(row.storage_key);
    const done = await db.query(
      'UPDATE files SET bytes_removed_at = now() WHERE id = $1 AND bytes_removed_at IS NULL',
      [row.id],
    );
    removed += done.rowCount ?? 0;
  }
  return removed;
}
