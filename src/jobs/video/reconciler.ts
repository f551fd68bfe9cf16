import type { Client } from '@temporalio/client';
import { workflowState } from '../workflowState';
import type { Config } from '../../config';
import type { Db } from '../../db';
import type { Logger } from '../../observability';
import { releaseHold } from '../../billing';
import * as jobs from './repo';
import { startVideoWorkflow } from './start';

/**
 * Repairs what a crash can leave between the ledger and Temporal (run periodically by the worker):
 *  1. a job whose workflow was never started (the API died between the hold+job transaction and the start):
 *     the workflow is started now (same id, so never twice);
 *  2. a job that is not final but whose workflow is gone or closed (terminated by hand, lost by a dev server):
 *     a missing workflow is started again (it resumes from the recorded provider task); a closed one means
 *     nothing will finish the job, so the hold is released and the job fails;
 *  3. an open video hold whose job is final or does not exist: released.
 * Every repair is idempotent (ledger keys derived from the job id; projections only move forward).
 */

export interface ReconcileReport {
  started: number;
  restarted: number;
  failed: number;
  released: number;
}

export async function reconcileVideoJobs(
  deps: { db: Db; temporal: Client; config: Config; logger?: Logger },
  opts: { graceMs?: number; limit?: number } = {},
): Promise<ReconcileReport> {
  const { db, temporal, config } = deps;
  const graceMs = opts.graceMs ?? config.video.reconcileGraceMs;
  const limit = opts.limit ?? 100;
  const report: ReconcileReport = { started: 0, restarted: 0, failed: 0, released: 0 };

  // 1. never started
  const unstarted = await db.query(
    `SELECT id FROM video_jobs WHERE status IN ('submitted', 'processing') AND workflow_started_at IS NULL
       AND created_at < now() - ($1::int * interval '1 millisecond') ORDER BY created_at LIMIT $2`,
    [graceMs, limit],
  );
  for (const row of unstarted.rows) {
    const job = await jobs.getJob(db, row.id);
    if (!job || jobs.isFinal(job.status)) continue;
    try {
      const r = await startVideoWorkflow(temporal, config, job);
      await jobs.markWorkflowStarted(db, job.id, 'reconciler');
      if (r === 'started') report.started++;
    } catch (e) {
      deps.logger?.warn({ jobId: job.id, err: (e as Error).message }, 'reconciler could not start video workflow');
    }
  }

  // 2. started, not final, quiet for a while: is the workflow still there?
  const quiet = await db.query(
    `SELECT id FROM video_jobs WHERE status IN ('submitted', 'processing') AND workflow_started_at IS NOT NULL
       AND updated_at < now() - ($1::int * interval '1 millisecond') ORDER BY updated_at LIMIT $2`,
    [graceMs, limit],
  );
  for (const row of quiet.rows) {
    const job = await jobs.getJob(db, row.id);
    if (!job || jobs.isFinal(job.status)) continue;
    let w;
    try {
      w = await workflowState(temporal, job.workflowId);
    } catch (e) {
      deps.logger?.warn({ jobId: job.id, err: (e as Error).message }, 'reconciler could not describe video workflow');
      continue;
    }
    if (w.state === 'running') continue;
    if (w.state === 'missing') {
      try {
        // The id is free (the history is gone): start afresh; submitVideo reuses the recorded provider task.
        const r = await startVideoWorkflow(temporal, config, job);
        if (r === 'started') report.restarted++;
      } catch (e2) {
        deps.logger?.warn({ jobId: job.id, err: (e2 as Error).message }, 'reconciler could not restart video workflow');
      }
      continue;
    }
    // Closed but the job is not final: re-read (the workflow may have finished a moment ago).
    const again = await jobs.getJob(db, job.id);
    if (!again || jobs.isFinal(again.status)) continue;
    await jobs.endJob(
      db,
      { jobId: job.id, holdId: job.holdId },
      {
        status: 'failed',
        message: `The job's workflow ended (${w.how}) without a result.`,
        code: 'workflow_ended',
      },
    );
    report.failed++;
  }

  // 3. open video holds with a final job or no job at all
  const holds = await db.query(
    `SELECT h.id, h.ref_id, j.status FROM holds h LEFT JOIN video_jobs j ON j.hold_id = h.id
     WHERE h.status = 'open' AND h.ref_type = $1 AND h.created_at < now() - ($2::int * interval '1 millisecond')
       AND (j.id IS NULL OR j.status IN ('completed', 'failed', 'expired'))
     LIMIT $3`,
    [jobs.LEDGER_REF_TYPE, graceMs, limit],
  );
  for (const h of holds.rows) {
    // A job settles its hold before it turns final, so only an anomaly gets here: release, never charge.
    const key = h.status ? `${jobs.settleKeyOf(h.ref_id)}:release` : `video-job:orphan-hold:${h.id}:release`;
    const r = await releaseHold(db, { holdId: h.id, idempotencyKey: key, memo: 'released by the video reconciler' });
    if (r.applied) report.released++;
  }
  if (report.started || report.restarted || report.failed || report.released)
    deps.logger?.info({ ...report }, 'video reconciler repaired jobs');
  return report;
}
