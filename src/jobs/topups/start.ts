import type { Client } from '@temporalio/client';
import { startJobWorkflow } from '../workflowStart';
import { isTemporalError } from '../temporalErrors';
import type { Order } from './repo';
import { TOPUP_PAID_SIGNAL, TOPUP_WORKFLOW_TYPE, topupWorkflowIdOf, type TopupInput } from './workflowContract';

/** Starting an order's workflow (./workflow.ts) through the job engine, and telling it the order was paid. */

export async function startTopupWorkflow(
  client: Client,
  taskQueue: string,
  order: Pick<Order, 'id' | 'accountId' | 'method' | 'expiresAt' | 'status'>,
): Promise<'started' | 'exists'> {
  const input: TopupInput = { orderId: order.id, expiresAt: order.expiresAt.getTime(), activityTimeoutMs: 30_000 };
  return startJobWorkflow(client, {
    workflowType: TOPUP_WORKFLOW_TYPE,
    taskQueue,
    workflowId: topupWorkflowIdOf(order.id),
    input: () => input,
    accountId: order.accountId,
    model: `topup:${order.method}`,
    status: order.status,
  });
}

/** Best effort: a workflow that misses it ends at the expiry, finding the order paid. */
export async function signalPaid(client: Client, orderId: string): Promise<void> {
  try {
    await client.workflow.getHandle(topupWorkflowIdOf(orderId)).signal(TOPUP_PAID_SIGNAL);
  } catch (e) {
    if (!isTemporalError(e, 'WorkflowNotFoundError')) throw e;
  }
}
