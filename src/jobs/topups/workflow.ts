import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import { condition, defineSignal, proxyActivities, setHandler, workflowInfo } from '@temporalio/workflow';
import {
  TOPUP_PAID_SIGNAL,
  type StatementInput,
  type StatementResult,
  type TopupActivities,
  type TopupEnd,
  type TopupInput,
  type TopupStatementActivities,
} from './workflowContract';

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

const DAY_MS = 86_400_000;
const VN_OFFSET_MS = 7 * 3_600_000;
/** The time a schedule's action was due, which Temporal sets on each run the schedule starts. */
const SCHEDULED_AT = defineSearchAttributeKey('TemporalScheduledStartTime', SearchAttributeType.DATETIME);

/**
 * One day's bank statement (docs/payments.md): the transfers whose webhook never came are credited, once, and the
 * day's report written. Started daily by the schedule `topup-statement`: it reads the Vietnam calendar day before
 * the time the run was scheduled for (a catch-up after an outage reads the missed day, not yesterday).
 */
export async function topupStatementWorkflow(input: StatementInput): Promise<StatementResult> {
  const acts = proxyActivities<TopupStatementActivities>({
    startToCloseTimeout: '30 minutes',
    retry: { initialInterval: '10 seconds', backoffCoefficient: 2, maximumInterval: '30 minutes', maximumAttempts: 20 },
  });
  const at = workflowInfo().typedSearchAttributes.get(SCHEDULED_AT)?.getTime() ?? Date.now();
  const day = input.day ?? new Date(at + VN_OFFSET_MS - DAY_MS).toISOString().slice(0, 10);
  return acts.pullTopupStatement(day);
}
