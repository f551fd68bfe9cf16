import type { Client } from '@temporalio/client';
import type { Db } from '../../db';
import type { Logger } from '../../observability';
import { workflowState } from '../workflowState';
import { expireOrder, quietOpenOrders } from './repo';
import { startTopupWorkflow } from './start';
import { topupWorkflowIdOf } from './workflowContract';

/**
 * Repairs open orders whose workflow is gone (run periodically by the worker, as every job type's reconciler): a
 * missing workflow (the API died between the order's commit and the start, or Temporal was down) is started under
 * the order's id, so never twice; an order whose workflow closed while it is still open is expired once past its
 * expiry. Each checked order is touched, so the next run reaches the ones behind it.
 */
export async function reconcileTopups(
  deps: { db: Db; temporal: Client; taskQueue: string; logger?: Logger },
  opts: { graceMs: number },
): Promise<{ started: number; expired: number }> {
  const report = { started: 0, expired: 0 };
  const orders = await quietOpenOrders(deps.db, opts.graceMs);
  for (const o of orders) {
    try {
      const w = await workflowState(deps.temporal, topupWorkflowIdOf(o.id));
      if (w.state === 'missing') {
        if ((await startTopupWorkflow(deps.temporal, deps.taskQueue, o)) === 'started') report.started++;
      } else if (w.state === 'closed' && o.expiresAt.getTime() <= Date.now()) {
        if ((await expireOrder(deps.db, o.id)) === 'expired') report.expired++;
      }
    } catch (e) {
      deps.logger?.warn({ orderId: o.id, err: (e as Error).message }, 'top-up reconciler could not repair an order');
    }
  }
  if (orders.length)
    await deps.db.query("UPDATE topup_orders SET updated_at = now() WHERE id = ANY($1) AND status = 'open'", [
      orders.map((o) => o.id),
    ]);
  if (report.started || report.expired) deps.logger?.info(report, 'top-up reconciler repaired orders');
  return report;
}
