import { proxyActivities, sleep } from '@temporalio/workflow';
import type { WebhookActivities } from './activities';
import type { DeliveryInput } from './workflowContract';
import type { RetrySchedule } from './settings';

/**
 * One webhook delivery (one event to one endpoint), at least once: try at once, then again after each timeout,
 * connection error, 429 or 5xx, with exponential backoff on durable timers, until a try succeeds, an answer is
 * final (another 4xx, a forbidden address, the endpoint deleted), the delivery is resent (a newer generation takes
 * over), or the retry window (24 h by default) has passed since the delivery started. Every try sends the same
 * webhook-id and body; each is signed at its own time. Deterministic: the HTTP call and its record are one
 * activity (src/jobs/webhooks/activities.ts), retried by Temporal only when it could not run (database, worker death).
 */

/** The wait after failed try number `attempt` (1-based): initialMs x 2^(attempt-1), at most maxMs. */
export function retryDelayMs(s: RetrySchedule, attempt: number): number {
  return Math.min(s.maxMs, s.initialMs * 2 ** Math.min(attempt - 1, 40));
}

export async function webhookDeliveryWorkflow(input: DeliveryInput): Promise<string> {
  const acts = proxyActivities<WebhookActivities>({
    startToCloseTimeout: input.attemptTimeoutMs,
    retry: { initialInterval: 1_000, backoffCoefficient: 2, maximumInterval: 60_000 },
  });
  const giveUpAt = Date.now() + input.retry.windowMs;
  // A try that found no slot ('busy': the account's tries at their cap, or an earlier try still in flight) sent
  // nothing and is not counted: the next real try keeps its backoff. (Only the loop's counter changes, not the
  // commands: histories from before replay alike.)
  for (let attempt = 1; ; attempt++) {
    const r = await acts.attemptWebhookDelivery({
      deliveryId: input.deliveryId,
      generation: input.generation,
      backoffMs: retryDelayMs(input.retry, attempt),
      maxWaitMs: input.retry.maxMs,
      giveUpAt,
    });
    if (r.waitMs === null) return r.outcome;
    if (r.outcome === 'busy') attempt--;
    await sleep(r.waitMs);
  }
}
