import { ApplicationFailure, Context } from '@temporalio/activity';
import { ReportConfigError } from '../src/providers';
import type { Catalog } from '../src/catalog';
import type { Db } from '../src/db';
import type { Logger } from '../src/observability';
import { signedHeaders } from '../src/webhooks/send';
import { reconcileProviderDay } from '../src/reconcile/reconcile';
import { daysBefore, lookbackDaysOf, unreconciledDays } from '../src/reconcile/status';
import type { ReconcileActivities } from '../src/reconcile/workflowContract';

/**
 * The reconciliation activity: reads the provider's report, compares, stores the drift (idempotent per day: a run
 * replaces its day's rows, so a retried attempt after a lost worker redoes the same work). It heartbeats after each
 * report call and each page of usage records, so a worker that died mid-run is noticed within the workflow's
 * heartbeat timeout rather than its start-to-close timeout.
 */
export function createReconcileActivities(deps: { db: Db; catalog: Catalog; logger?: Logger }): ReconcileActivities {
  return {
    async reconcileProviderDay({ provider, day }) {
      const rows = await reconcileProviderDay(deps, provider, day, () => Context.current().heartbeat()).catch((e) => {
        // A credential or setting missing: no retry helps; the day stays listed as not reconciled.
        if (e instanceof ReportConfigError) throw ApplicationFailure.nonRetryable(e.message, 'ReportConfigError');
        throw e;
      });
      // The drift the gateway's own recorded costs do not explain is what the operator is told about.
      const maxDriftRatio = rows.reduce(
        (m, r) => Math.max(m, r.reported > 0 ? Math.abs(r.drift - r.explained) / r.reported : r.recorded > 0 ? 1 : 0),
        0,
      );
      const threshold = Number(process.env.RECONCILE_DRIFT_THRESHOLD ?? 0.02);
      return { provider, day, rows: rows.length, maxDriftRatio, overThreshold: maxDriftRatio > threshold };
    },
    async unreconciledDaysBefore({ provider, day }) {
      return unreconciledDays(deps.db, provider, daysBefore(day, lookbackDaysOf()));
    },
    async notifyOperatorDrift({ eventId, result }) {
      const url = process.env.OPERATOR_WEBHOOK_URL;
      if (!url) {
        deps.logger?.warn({ ...result }, 'reconciliation drift past the threshold (no OPERATOR_WEBHOOK_URL)');
        return;
      }
      const payload = JSON.stringify({
        id: eventId,
        type: 'reconciliation.drift',
        created_at: Math.floor(Date.now() / 1000),
        data: {
          provider: result.provider,
          day: result.day,
          max_drift_ratio: result.maxDriftRatio,
          threshold: Number(process.env.RECONCILE_DRIFT_THRESHOLD ?? 0.02),
        },
      });
      const secret = process.env.OPERATOR_WEBHOOK_SECRET;
      const r = await fetch(url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...(secret ? signedHeaders(eventId, payload, [secret], new Date()) : { 'webhook-id': eventId }),
        },
        body: payload,
        signal: AbortSignal.timeout(15_000),
      });
      // Not delivered: the activity's retries try again (the same event id).
      if (!r.ok) throw new Error(`operator webhook answered ${r.status}`);
    },
  };
}
