/**
 * Usage reconciliation, a job kind (docs/billing.md): each provider's usage and cost report compared daily with
 * what the gateway recorded. The room's one entrance for the rest of src/: code outside src/jobs/reconcile/ imports
 * only this file, but workflows/index.ts (the workflow, ./workflow.ts) and activities/index.ts (./activities.ts),
 * the worker's entry points. Nothing here loads a Temporal package.
 */
export { RECONCILE_WORKFLOW_TYPE } from './workflowContract';
export { FIELDS, isReconciled, NOT_RECONCILED, reportedFields } from './reconcile';
export { lookbackDaysOf, reconcileStatus } from './status';
export { registerReconcileMetrics } from './metrics';
export { ensureReconcileSchedules } from './schedule';
