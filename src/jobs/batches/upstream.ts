import type { Queryable } from '../../db';

/**
 * The provider's batch a native batch runs as (migration 115): written once, when the provider has answered the
 * submission, and read by everything that resumes the batch. Kept apart from ./repo.ts, which owns the money.
 */

export interface UpstreamBatch {
  providerId: string;
  nativeId: string;
}

export async function upstreamOf(db: Queryable, batchId: string): Promise<UpstreamBatch | null> {
  const r = await db.query(
    'SELECT upstream_provider_id, upstream_batch_id FROM batches WHERE id = $1 AND upstream_batch_id IS NOT NULL',
    [batchId],
  );
  const row = r.rows[0] as { upstream_provider_id: string; upstream_batch_id: string } | undefined;
  return row ? { providerId: row.upstream_provider_id, nativeId: row.upstream_batch_id } : null;
}

/** Records the provider's batch; the first one recorded stays (a retry finds it and submits nothing). */
export async function recordUpstream(db: Queryable, batchId: string, u: UpstreamBatch): Promise<UpstreamBatch> {
  await db.query(
    `UPDATE batches SET upstream_provider_id = $2, upstream_batch_id = $3, updated_at = now()
      WHERE id = $1 AND upstream_batch_id IS NULL`,
    [batchId, u.providerId, u.nativeId],
  );
  return (await upstreamOf(db, batchId)) ?? u;
}
