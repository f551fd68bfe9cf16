import type { Client } from '@temporalio/client';
import type { Db } from '../db/pool';
import type { Logger } from '../observability/logger';
import { workflowState } from '../jobs/workflowState';
import { deliveryWorkflowIdOf } from './repo';
import type { WebhookSettings } from './settings';
import { startDelivery } from './start';

/**
 * Repairs deliveries left pending with nothing to send them (run periodically by the worker), as the video and
 * batch reconcilers repair jobs: a pending delivery quiet past the grace (no try recorded, or its next try overdue)
 * whose workflow does not exist (the emission or a resend failed to start it, the process died between the record
 * and the start) has it started now, under its id, so never twice; one whose workflow closed without ending it
 * (terminated, failed) is given a new generation (as a resend is) and started, so it is delivered at least once.
 */

export interface DeliveryReconcileReport {
  started: number;
  restarted: number;
}

export async function reconcileDeliveries(
  deps: { db: Db; temporal: Client; taskQueue: string; settings: WebhookSettings; logger?: Logger },
  opts: { graceMs: number; limit?: number },
): Promise<DeliveryReconcileReport> {
  const { db, temporal } = deps;
  const report: DeliveryReconcileReport = { started: 0, restarted: 0 };
  const quiet = await db.query(
    `SELECT id, generation FROM webhook_deliveries
     WHERE status = 'pending' AND updated_at < now() - ($1::int * interval '1 millisecond')
       AND (next_attempt_at IS NULL OR next_attempt_at < now() - ($1::int * interval '1 millisecond'))
     ORDER BY updated_at LIMIT $2`,
    [opts.graceMs, opts.limit ?? 100],
  );
  for (const d of quiet.rows as { id: string; generation: number }[]) {
    let w;
    try {
      w = await workflowState(temporal, deliveryWorkflowIdOf(d.id, d.generation));
    } catch (e) {
      deps.logger?.warn({ deliveryId: d.id, err: (e as Error).message }, 'reconciler could not check a delivery');
      continue;
    }
    if (w.state === 'running') continue;
    try {
      if (w.state === 'missing') {
        const ref = { deliveryId: d.id, generation: d.generation };
        if ((await startDelivery(temporal, deps.taskQueue, deps.settings, ref)) === 'started') report.started++;
        continue;
      }
      // Closed while the delivery is pending (a workflow that ends it records its outcome first): a new
      // generation, unless a try or a resend moved it meanwhile.
      const next = await db.query(
        `UPDATE webhook_deliveries SET generation = generation + 1, next_attempt_at = now(), updated_at = now()
         WHERE id = $1 AND generation = $2 AND status = 'pending' RETURNING generation`,
        [d.id, d.generation],
      );
      if (!next.rowCount) continue;
      const ref = { deliveryId: d.id, generation: next.rows[0].generation as number };
      if ((await startDelivery(temporal, deps.taskQueue, deps.settings, ref)) === 'started') report.restarted++;
    } catch (e) {
      deps.logger?.warn({ deliveryId: d.id, err: (e as Error).message }, 'reconciler could not start a delivery');
    }
  }
  if (report.started || report.restarted) deps.logger?.info({ ...report }, 'delivery reconciler repaired deliveries');
  return report;
}
