import type { Client } from '@temporalio/client';
import { isTemporalError } from '../temporalErrors';
import { fairShare } from '../fairShare';
import type { Db } from '../../db';
import { deliveryWorkflowIdOf, type DeliveryRef } from './repo';
import { admitResend } from './resends';
import { deliveryLimits, type WebhookSettings } from './settings';
import { DELIVERY_WORKFLOW_TYPE, type DeliveryInput } from './workflowContract';

/** Starting a delivery's workflow (src/jobs/webhooks/workflow.ts): by the emitting activity and by a resend. */

/** Starts the delivery's workflow; 'exists' when it already ran or runs (its id is never reused). */
export async function startDelivery(
  client: Client,
  taskQueue: string,
  s: WebhookSettings,
  ref: DeliveryRef,
  /** The event's account, when the caller has it: its fair share of the deliveries' queue (src/jobs/fairShare.ts). */
  accountId?: string,
): Promise<'started' | 'exists'> {
  const input: DeliveryInput = { ...ref, retry: s.retry, attemptTimeoutMs: s.timeoutMs + 20_000 };
  try {
    await client.workflow.start(DELIVERY_WORKFLOW_TYPE, {
      taskQueue,
      workflowId: deliveryWorkflowIdOf(ref.deliveryId, ref.generation),
      args: [input],
      workflowIdReusePolicy: 'REJECT_DUPLICATE',
      ...(accountId ? fairShare(accountId) : {}),
    });
    return 'started';
  } catch (e) {
    if (isTemporalError(e, 'WorkflowExecutionAlreadyStartedError')) return 'exists';
    throw e;
  }
}

/**
 * Sends a delivery again at once (a new generation: a pending delivery's waiting workflow stands down at its next
 * try; a try of it still in flight ends first). Null when the delivery is not on this endpoint of the account, or
 * the endpoint was deleted; a 429 (ApiError) past the resend limits.
 */
export async function resendDelivery(
  db: Db,
  client: Client,
  taskQueue: string,
  s: WebhookSettings,
  a: { accountId: string; endpointId: string; deliveryId: string },
): Promise<DeliveryRef | null> {
  const ref = await admitResend(db, deliveryLimits(s), a);
  if (ref) await startDelivery(client, taskQueue, s, ref, a.accountId);
  return ref;
}
