import type { EventType } from './eventTypes';
import type { AttemptOutcome } from './repo';
import type { RetrySchedule } from './settings';

/**
 * The webhook delivery workflow's contract, in one place: its type and input, and the arguments and answers of
 * the activities it and every event-emitting job call. ./start.ts starts it, src/jobs/webhooks/workflow.ts runs it,
 * src/jobs/webhooks/activities.ts implements the activities, ./repo.ts stores events, deliveries and tries. Types
 * only, so the workflow bundle imports nothing that does I/O.
 *
 * Everything named here is recorded in the histories of deliveries in flight: keep the registered names, add
 * fields as optional.
 */

export const DELIVERY_WORKFLOW_TYPE = 'webhookDeliveryWorkflow';

/** The delivery workflow's input, fixed when it starts. */
export interface DeliveryInput {
  deliveryId: string;
  generation: number;
  retry: RetrySchedule;
  /** Per-try limit of the activity: the POST's own limit plus the database writes around it. */
  attemptTimeoutMs: number;
}

export interface EmitInput {
  accountId: string;
  type: EventType;
  /** The event's `data` (for a job: its id). */
  data: Record<string, unknown>;
  /** What makes the event unique, from the transition that caused it (e.g. `video:<jobId>:completed`). */
  key: string;
}

export interface AttemptInput {
  deliveryId: string;
  generation: number;
  /** The backoff after this try if it must be retried (an endpoint's Retry-After may lengthen it, up to maxWaitMs). */
  backoffMs: number;
  maxWaitMs: number;
  /** Epoch ms after which a failed try is the last. */
  giveUpAt: number;
}

/**
 * waitMs null: the delivery is over (succeeded, failed, cancelled or superseded by a resend). 'busy': nothing was
 * sent (no slot); try again after waitMs, which does not count as a try.
 */
export interface AttemptResult {
  outcome: AttemptOutcome | 'superseded' | 'busy';
  waitMs: number | null;
}
