import type { Client } from '@temporalio/client';
import type { Db } from '../../db';
import type { Logger } from '../../observability';
import { workflowState } from '../workflowState';
import { deliveryWorkflowIdOf } from './repo';
import type { WebhookSettings } from './settings';
import { startDelivery } from './start';

/**
 * Repairs deliveries left pending with nothing to send them (run periodically by the worker), as the video and
 * batch reconcilers repair jobs: a pending delivery quiet past the grace (no try recorded, or its next try overdue)
 * whose workflow does not exist (the emission or a resend failed to start it, the process died between the record
 * and the start) has it started now, under its id, so never twice; one whose workflow closed without ending it
 * (terminated, failed) is given a new generation (as a resend is) and started, so it is delivered at least once.
 *
 * It pages through the quiet deliveries, oldest first, up to `maxChecks` a run, and the next run goes on after the
 * last one checked (`cursor`, kept by the caller) until it has been through them all and starts again: one account's
 * backlog of deliveries that wait their turn (running, so nothing to repair) does not hide the lost ones behind it.
 */

/** Where the next run goes on: after this delivery (updated_at, id); empty: from the oldest. */
export interface DeliveryReconcileCursor {
  after?: { updatedAt: string; id: string };
}

export interface DeliveryReconcileReport {
  started: number;
  restarted: number;
}

export async function reconcileDeliveries(
  deps: { db: Db; temporal: Client; taskQueue: string; settings: WebhookSettings; logger?: Logger },
  opts: { graceMs: number; limit?: number; maxChecks?: number; cursor?: DeliveryReconcileCursor },
): Promise<DeliveryReconcileReport> {
  const { db } = deps;
  const report: DeliveryReconcileReport = { started: 0, restarted: 0 };
  const limit = opts.limit ?? 100;
  const maxChecks = opts.maxChecks ?? 1_000;
  const cursor = opts.cursor ?? {};
  for (let checked = 0; checked < maxChecks;) {
    const after = cursor.after;
    const quiet = await db.query(
      `SELECT id, generation, updated_at::text AS at FROM webhook_deliveries
       WHERE status = 'pending' AND updated_at < now() - ($1::int * interval '1 millisecond')
         AND (next_attempt_at IS NULL OR next_attempt_at < now() - ($1::int * interval '1 millisecond'))
         AND ($3::timestamptz IS NULL OR (updated_at, id) > ($3::timestamptz, $4::uuid))
       ORDER BY updated_at, id LIMIT $2`,
      [opts.graceMs, limit, after?.updatedAt ?? null, after?.id ?? null],
    );
    // The time as text: its microseconds, which a Date would lose, keep the page's place exact.
    const rows = quiet.rows as { id: string; generation: number; at: string }[];
    for (const d of rows) await repairDelivery(deps, d, report);
    checked += rows.length;
    const last = rows.at(-1);
    if (rows.length < limit || !last) {
      delete cursor.after; // through them all: the next run starts from the oldest
      break;
    }
    cursor.after = { updatedAt: last.at, id: last.id };
  }
  if (report.started || report.restarted) deps.logger?.info({ ...report }, 'delivery reconciler repaired deliveries');
  return report;
}

/** One quiet pending delivery: started if its workflow is missing, given a new generation if it closed. */
async function repairDelivery(
  deps: { db: Db; temporal: Client; taskQueue: string; settings: WebhookSettings; logger?: Logger },
  d: { id: string; generation: number },
  report: DeliveryReconcileReport,
): Promise<void> {
  const { db, temporal } = deps;
  let w;
  try {
    w = await workflowState(temporal, deliveryWorkflowIdOf(d.id, d.generation));
  } catch (e) {
    deps.logger?.warn({ deliveryId: d.id, err: (e as Error).message }, 'reconciler could not check a delivery');
    return;
  }
  if (w.state === 'running') return;
  try {
    if (w.state === 'missing') {
      const ref = { deliveryId: d.id, generation: d.generation };
      if ((await startDelivery(temporal, deps.taskQueue, deps.settings, ref)) === 'started') report.started++;
      return;
    }
    // Closed while the delivery is pending (a workflow that ends it records its outcome first): a new
    // generation, unless a try or a resend moved it meanwhile.
    const next = await db.query(
      `UPDATE webhook_deliveries SET generation = generation + 1, next_attempt_at = now(), updated_at = now()
         WHERE id = $1 AND generation = $2 AND status = 'pending' RETURNING generation`,
      [d.id, d.generation],
    );
    if (!next.rowCount) return;
    const ref = { deliveryId: d.id, generation: next.rows[0].generation as number };
    if ((await startDelivery(temporal, deps.taskQueue, deps.settings, ref)) === 'started') report.restarted++;
  } catch (e) {
    deps.logger?.warn({ deliveryId: d.id, err: (e as Error).message }, 'reconciler could not start a delivery');
  }
}
