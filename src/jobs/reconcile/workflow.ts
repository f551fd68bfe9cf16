import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import { isCancellation, patched, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { ReconcileActivities, ReconcileInput, ReconcileResult } from './workflowContract';

const DAY_MS = 86_400_000;
/** The time a schedule's action was due, which Temporal sets on each run the schedule starts. */
const SCHEDULED_AT = defineSearchAttributeKey('TemporalScheduledStartTime', SearchAttributeType.DATETIME);

const acts = proxyActivities<ReconcileActivities>({
  // The activity heartbeats after each report call (30 s at most each) and each page of 5,000 usage records: a
  // worker lost mid-run is noticed in 2 minutes; a day of many records may take longer than that as a whole.
  // (Activity options are not part of the replayed command sequence: histories of earlier runs replay unchanged.)
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: '2 minutes',
  // A provider's report API down for a while: retried for hours (the next day's run does not wait on this one).
  retry: { initialInterval: '10 seconds', backoffCoefficient: 2, maximumInterval: '30 minutes', maximumAttempts: 20 },
});

/** The days of the look-back, retried: a few attempts each (the next run tries again what still fails). */
const lookback = proxyActivities<ReconcileActivities>({
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: '2 minutes',
  retry: { initialInterval: '10 seconds', backoffCoefficient: 2, maximumInterval: '5 minutes', maximumAttempts: 3 },
});

/**
 * One provider's day reconciled (docs/billing.md, "Reconciliation"): one run per provider per day, started by the
 * provider's Temporal schedule (`reconcile-<provider>`), so each day's run is visible in the Temporal UI; each run
 * also reconciles the days of its look-back that have no reconciliation yet.
 */
export async function reconcileProviderDayWorkflow(input: ReconcileInput): Promise<ReconcileResult> {
  // A scheduled run reconciles the day before the time it was scheduled for (a backfill, or a catch-up after an
  // outage, runs late); the schedule sets that time on the run, recorded in its history (replay-safe).
  const at = workflowInfo().typedSearchAttributes.get(SCHEDULED_AT)?.getTime() ?? Date.now();
  const day = input.day ?? new Date(at - DAY_MS).toISOString().slice(0, 10);
  const result = await acts.reconcileProviderDay({ provider: input.provider, day });
  // One event per run (its id stays the same across the delivery's retries).
  if (result.overThreshold) await acts.notifyOperatorDrift({ eventId: `evt_${workflowInfo().runId}`, result });
  // Then the earlier days no run reconciled (one whose run failed its attempts, a firing that never ran). Histories
  // recorded before this step replay without it.
  if (patched('reconcile-lookback')) {
    for (const day of await acts.unreconciledDaysBefore({ provider: input.provider, day: result.day })) {
      try {
        const r = await lookback.reconcileProviderDay({ provider: input.provider, day });
        if (r.overThreshold)
          await acts.notifyOperatorDrift({ eventId: `evt_${workflowInfo().runId}_${day}`, result: r });
      } catch (e) {
        if (isCancellation(e)) throw e;
        // Still not reconciled: listed so (reconcile-status), and the next run's look-back tries it again.
      }
    }
  }
  return result;
}
