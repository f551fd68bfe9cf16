import type { Client } from '@temporalio/client';
import type { Config } from '../config';
import type { Db } from '../db/pool';
import type { Logger } from '../observability/logger';
import * as repo from './repo';
import { startBatchWorkflow } from './start';

/**
 * Repairs what a crash can leave between the ledger and Temporal (run periodically by the worker): a batch whose
 * workflow was never started (the API died between the hold+batch transaction and the start) has it started now,
 * under the same id, so never twice; the workflow then runs the batch from where it stands. A start that finds
 * the workflow already there only records it.
 */
export async function reconcileBatches(
  deps: { db: Db; temporal: Client; config: Config; logger?: Logger },
  opts: { graceMs?: number; limit?: number } = {},
): Promise<{ started: number }> {
  const graceMs = opts.graceMs ?? deps.config.video.reconcileGraceMs;
  const r = await deps.db.query(
    `SELECT id FROM batches WHERE status IN ${repo.OPEN_SQL} AND workflow_started_at IS NULL
       AND created_at < now() - ($1::int * interval '1 millisecond') ORDER BY created_at LIMIT $2`,
    [graceMs, opts.limit ?? 100],
  );
  let started = 0;
  for (const row of r.rows) {
    const b = await repo.getBatch(deps.db, row.id);
    if (!b) continue;
    const how = await startBatchWorkflow(deps.temporal, deps.config, b);
    if (how === 'started') {
      started++;
      deps.logger?.warn({ batchId: b.id }, 'started the workflow of a batch whose start was lost');
    }
    await repo.markWorkflowStarted(deps.db, b.id);
  }
  return { started };
}
