import { condition, defineSignal, proxyActivities, setHandler } from '@temporalio/workflow';
import {
  TOPUP_PAID_SIGNAL,
  type TopupActivities,
  type TopupEnd,
  type TopupInput,
} from '../src/jobs/topups/workflowContract';

/**
 * One top-up order (docs/payments.md): open until paid or its expiry, then expired. A credit signals `topupPaid`
 * and the workflow ends; at the expiry it asks the database to expire the order, which leaves a paid one paid (a
 * signal lost on the way changes nothing: the row is the truth). A transfer after the expiry is still credited, by
 * the webhook, to the expired order. Deterministic: the timer is durable, the reads and writes are activities.
 */

export const topupPaidSignal = defineSignal(TOPUP_PAID_SIGNAL);

export async function topupOrderWorkflow(input: TopupInput): Promise<TopupEnd> {
  const acts = proxyActivities<TopupActivities>({
    startToCloseTimeout: input.activityTimeoutMs,
    retry: { initialInterval: 1_000, backoffCoefficient: 2, maximumInterval: 60_000 },
  });
  let paid = false;
  setHandler(topupPaidSignal, () => {
    paid = true;
  });
  const first = await acts.topupStatus(input.orderId);
  if (first === null) return 'missing';
  if (first !== 'open') return first;
  for (;;) {
    const wait = input.expiresAt - Date.now();
    if (wait > 0 && (await condition(() => paid, wait))) return 'paid';
    const now = await acts.expireTopup(input.orderId);
    if (now === null) return 'missing';
    if (now !== 'open') return now;
    // Still open (the clock of the database behind the workflow's): wait a little more.
    if (await condition(() => paid, 1_000)) return 'paid';
  }
}
