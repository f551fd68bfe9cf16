// The workflow bundle's entry point (src/worker.ts bundles it): every job kind's workflows, each exported under its
// workflow type's name (recorded histories replay under it) from the kind's own workflow.ts, never through the kind's
// index.ts, which would pull its I/O into the bundle. Deterministic code only.
export { videoJobWorkflow, cancelSignal, stageQuery } from '../src/jobs/video/workflow';
export { webhookDeliveryWorkflow } from '../src/jobs/webhooks/workflow';
export { batchJobWorkflow, batchCancelSignal, batchStageQuery } from '../src/jobs/batches/workflow';
export { backgroundResponseWorkflow, backgroundCancelSignal } from '../src/jobs/backgroundResponses/workflow';
export { reconcileProviderDayWorkflow } from '../src/jobs/reconcile/workflow';
export { topupOrderWorkflow, topupPaidSignal, topupStatementWorkflow } from '../src/jobs/topups/workflow';
