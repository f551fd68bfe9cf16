import type { Client } from '@temporalio/client';
import type { Config } from '../../config';
import type { Db } from '../../db';
import type { Logger } from '../../observability';
import type { Storage } from '../../storage';
import { workflowState } from '../workflowState';
import { startDelivery, webhookTaskQueue } from '../webhooks';
import { finalizeBatch } from './finalize';
import * as repo from './repo';
import { startBatchWorkflow } from './start';

/**
 * Repairs what a crash or an operator can leave between the ledger and Temporal (run periodically by the worker),
 * as the video reconciler does for video jobs:
 *  1. a batch whose workflow was never started (the API died between the hold+batch transaction and the start):
 *     it is started now, under the same id, so never twice; the workflow runs the batch from where it stands;
 *  2. an open batch whose workflow is gone or closed (failed, terminated, timed out, or completed without ending
 *     it): a missing workflow is started again (it resumes from the committed chunks); a closed one means nothing
 *     will end the batch, so it is ended here `failed`: its committed lines (charged) in its output and error
 *     files, the rest of its hold released, its batch.failed event recorded and its deliveries started.
 * Every repair is idempotent (file ids, ledger keys and the event derive from the batch id; a final batch stays).
 */

export interface BatchReconcileReport {
  started: number;
  restarted: number;
  failed: number;
}

export async function reconcileBatches(
  deps: { db: Db; temporal: Client; config: Config; storage: Storage; logger?: Logger },
  opts: { graceMs?: number; limit?: number } = {},
): Promise<BatchReconcileReport> {
  const { db, temporal, config } = deps;
  const graceMs = opts.graceMs ?? config.video.reconcileGraceMs;
  const limit = opts.limit ?? 100;
  const report: BatchReconcileReport = { started: 0, restarted: 0, failed: 0 };

  // 1. never started
  const unstarted = await db.query(
    `SELECT id FROM batches WHERE status IN ${repo.OPEN_SQL} AND workflow_started_at IS NULL
       AND created_at < now() - ($1::int * interval '1 millisecond') ORDER BY created_at LIMIT $2`,
    [graceMs, limit],
  );
  for (const row of unstarted.rows) {
    const b = await repo.getBatch(db, row.id);
    if (!b) continue;
    const how = await startBatchWorkflow(temporal, config, b);
    if (how === 'started') {
      report.started++;
      deps.logger?.warn({ batchId: b.id }, 'started the workflow of a batch whose start was lost');
    }
    await repo.markWorkflowStarted(db, b.id);
  }

  // 2. started, open, quiet for a while: is its workflow still running?
  const quiet = await db.query(
    `SELECT id FROM batches WHERE status IN ${repo.OPEN_SQL} AND workflow_started_at IS NOT NULL
       AND updated_at < now() - ($1::int * interval '1 millisecond') ORDER BY updated_at LIMIT $2`,
    [graceMs, limit],
  );
  for (const row of quiet.rows) {
    const b = await repo.getBatch(db, row.id);
    if (!b || repo.isFinal(b.status)) continue;
    let w;
    try {
      w = await workflowState(temporal, b.workflowId);
    } catch (e) {
      deps.logger?.warn({ batchId: b.id, err: (e as Error).message }, 'reconciler could not describe batch workflow');
      continue;
    }
    if (w.state === 'running') continue;
    if (w.state === 'missing') {
      // The id is free (its history is gone): start afresh; the workflow resumes from the committed chunks.
      try {
        if ((await startBatchWorkflow(temporal, config, b)) === 'started') report.restarted++;
      } catch (e2) {
        deps.logger?.warn({ batchId: b.id, err: (e2 as Error).message }, 'reconciler could not restart batch workflow');
      }
      continue;
    }
    const closed = w.how;
    // Closed, and the batch is not final: nothing will end it but this (finalizing re-reads it under its lock, so a
    // workflow that ended it a moment ago wins and this changes nothing).
    const chunks = await repo.listChunks(db, b.id);
    const last = chunks.at(-1);
    const done = await finalizeBatch(
      { ...deps, staleMs: config.batches.heartbeatMs },
      {
        batchId: b.id,
        status: 'failed',
        offset: last?.nextOffset ?? 0,
        line: last ? last.firstLine + last.lines - 1 : 0,
        failure: `The batch's workflow ended (${closed}) without finishing it.`,
      },
    );
    if (done.committed) {
      report.failed++;
      deps.logger?.warn({ batchId: b.id, workflow: closed }, 'ended a batch whose workflow closed without ending it');
    }
    for (const d of done.deliveries) await startDelivery(temporal, webhookTaskQueue(config), config.webhooks, d);
  }
  if (report.started || report.restarted || report.failed)
    deps.logger?.info({ ...report }, 'batch reconciler repaired batches');
  return report;
}
