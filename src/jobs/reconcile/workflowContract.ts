/**
 * The reconciliation workflow's contract (./workflow.ts runs it, ./activities.ts implements its
 * activity, ./schedule.ts schedules it daily per provider). Types only: the workflow bundle imports
 * nothing that does I/O. Registered names are recorded in histories: never renamed.
 */

export const RECONCILE_WORKFLOW_TYPE = 'reconcileProviderDayWorkflow';

export interface ReconcileInput {
  /** The catalog provider id. */
  provider: string;
  /** The UTC day (YYYY-MM-DD); absent (a scheduled run): the day before the run. */
  day?: string;
}

export interface ReconcileResult {
  provider: string;
  day: string;
  /** Rows stored (model x field). */
  rows: number;
  /** The largest |reported - recorded| / reported over the rows (0 when none). */
  maxDriftRatio: number;
  /** maxDriftRatio is past RECONCILE_DRIFT_THRESHOLD: the operator is told (notifyOperatorDrift). */
  overThreshold: boolean;
}

export interface ReconcileActivities {
  reconcileProviderDay(a: { provider: string; day: string }): Promise<ReconcileResult>;
  /**
   * The days of the look-back before `day` (RECONCILE_LOOKBACK_DAYS) the provider has no reconciliation of: a run
   * that failed its attempts, or a firing that never ran. The run reconciles them after its own day.
   */
  unreconciledDaysBefore(a: { provider: string; day: string }): Promise<string[]>;
  /** POSTs a signed `reconciliation.drift` event to OPERATOR_WEBHOOK_URL (none set: logged only). */
  notifyOperatorDrift(a: { eventId: string; result: ReconcileResult }): Promise<void>;
}
