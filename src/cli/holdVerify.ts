import type { Queryable } from '../db';
import * as batches from '../batches/repo';
import * as videoJobs from '../video/repo';

/**
 * No hold outlives its job: an open hold whose job (video job, batch) is final, or whose job does not exist, holds
 * money that nothing will ever charge or release. verify-ledger reports each (the reconcilers release them).
 */

export interface StrandedHold {
  holdId: string;
  accountId: string;
  refType: string;
  refId: string | null;
  remaining: number;
  /** The job's status, or null when no job names the hold. */
  jobStatus: string | null;
}

export async function strandedJobHolds(db: Queryable, limit = 1000): Promise<StrandedHold[]> {
  const r = await db.query(
    `SELECT h.id, h.account_id, h.ref_type, h.ref_id, h.remaining, COALESCE(v.status, b.status) AS job_status
     FROM holds h
     LEFT JOIN video_jobs v ON h.ref_type = $1 AND v.hold_id = h.id
     LEFT JOIN batches b ON h.ref_type = $2 AND b.hold_id = h.id
     WHERE h.status = 'open' AND h.ref_type IN ($1, $2)
       AND (COALESCE(v.status, b.status) IS NULL OR v.status = ANY($3::text[]) OR b.status = ANY($4::text[]))
     ORDER BY h.created_at LIMIT $5`,
    [videoJobs.LEDGER_REF_TYPE, batches.LEDGER_REF_TYPE, videoJobs.FINAL_STATUSES, batches.FINAL_STATUSES, limit],
  );
  return r.rows.map((x) => ({
    holdId: x.id,
    accountId: x.account_id,
    refType: x.ref_type,
    refId: x.ref_id,
    remaining: Number(x.remaining),
    jobStatus: x.job_status,
  }));
}
