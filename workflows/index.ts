// Workflow definitions (deterministic code only; bundled by the Temporal worker).
export { videoJobWorkflow, cancelSignal, stageQuery } from '../src/jobs/video/workflow';
export { webhookDeliveryWorkflow } from '../src/jobs/webhooks/workflow';
export { batchJobWorkflow, batchCancelSignal, batchStageQuery } from '../src/jobs/batches/workflow';
export { backgroundResponseWorkflow, backgroundCancelSignal } from '../src/jobs/backgroundResponses/workflow';
export { reconcileProviderDayWorkflow } from '../src/jobs/reconcile/workflow';
export { topupOrderWorkflow, topupPaidSignal, topupStatementWorkflow } from '../src/jobs/topups/workflow';
