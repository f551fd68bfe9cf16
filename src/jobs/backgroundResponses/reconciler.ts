import type { Client } from '@temporalio/client';
import type { Config } from '../../config';
import type { Db } from '../../db';
import type { Logger } from '../../observability';
import type { Catalog } from '../../catalog';
import { releaseHold } from '../../billing';
import { workflowState } from '../workflowState';
import { type DeliveryRef, startDelivery, webhookTaskQueue } from '../webhooks';
import * as repo from './repo';
import { startBackgroundWorkflow } from './start';
import { endFromStoredAnswer } from './storedEnd';

/**
 * The job engine's reconciler pattern for background responses (run periodically by the worker), so no hold
 * outlives its response:
 *  1. a response whose workflow was never started (the API died between its commit and the start): started now,
 *     under the same id, so never twice;
 *  2. a response not final whose workflow is closed (terminated by hand) or gone: ended from its stored final
 *     event and usage when an attempt stored them (charged once, src/jobs/backgroundResponses/storedEnd.ts), else
 *     `failed`, its hold released, nothing charged; its webhook event recorded with the end (a missing workflow is
 *     started again instead: the run resumes from the store);
 *  3. an open background-response hold whose response is final or missing: released.
 * Also deletes the events of responses that ended longer ago than the retention.
 */
export async function reconcileBackgroundResponses(
  deps: { db: Db; temporal: Client; config: Config; catalog: Pick<Catalog, 'get'>; logger?: Logger },
  opts: { graceMs?: number; limit?: number } = {},
): Promise<{ started: number; failed: number; endedFromStored: number; released: number; swept: number }> {
  const { db, temporal, config } = deps;
  const graceMs = opts.graceMs ?? config.video.reconcileGraceMs;
  const limit = opts.limit ?? 100;
  const report = { started: 0, failed: 0, endedFromStored: 0, released: 0, swept: 0 };
  for (const id of await repo.unstarted(db, graceMs, limit)) {
    const row = await repo.getResponse(db, id);
    if (!row || repo.isFinal(row.status)) continue;
    if ((await startBackgroundWorkflow(temporal, config, row)) === 'started') report.started++;
    await repo.markWorkflowStarted(db, id);
  }
  for (const id of await repo.quiet(db, graceMs, limit)) {
    const row = await repo.getResponse(db, id);
    if (!row || repo.isFinal(row.status)) continue;
    const w = await workflowState(temporal, row.workflowId);
    if (w.state === 'running') continue;
    if (w.state === 'missing') {
      if ((await startBackgroundWorkflow(temporal, config, row)) === 'started') report.started++;
      continue;
    }
    // No workflow is left to announce the end: its event is recorded with it (a delivery not started here is
    // started by the deliveries' reconciler).
    const deliveries: DeliveryRef[] = [];
    // An attempt stored the whole answer (its final event and usage) before the workflow was lost: the response
    // ends from it, charged once, as the workflow would have ended it. Its other attempts still open were lost with
    // the workflow: the gateway's cost, recorded before the end.
    const answered = row.cancelRequested ? null : await repo.storedTerminal(db, id);
    await repo.closeLostAttempts(db, id, repo.lostAttemptCost(deps.catalog, row), { answered: answered?.attempt });
    if (answered) {
      const end = await endFromStoredAnswer(deps, row, null, deliveries);
      if (end?.ended) report.endedFromStored++;
    } else {
      const ended = await repo.endResponse(db, id, {
        status: row.cancelRequested ? 'cancelled' : 'failed',
        response: null,
        error: row.cancelRequested
          ? null
          : { code: 'workflow_ended', message: `The response's workflow ended (${w.how}).` },
        usage: null,
        cost: 0,
        attempt: null,
        announce: deliveries,
      });
      if (ended) report.failed++;
    }
    for (const d of deliveries) await startDelivery(temporal, webhookTaskQueue(config), config.webhooks, d);
  }
  for (const holdId of await repo.strandedHolds(db, graceMs, limit)) {
    const r = await releaseHold(db, {
      holdId,
      idempotencyKey: `bgresp:orphan-hold:${holdId}:release`,
      memo: 'released by the background response reconciler',
    });
    if (r.applied) report.released++;
  }
  report.swept = await repo.sweepEvents(db, config.backgroundResponses.eventsRetentionMs);
  if (report.started || report.failed || report.endedFromStored || report.released)
    deps.logger?.info({ ...report }, 'background response reconciler repaired responses');
  return report;
}
