// Workflow definitions (deterministic code only; bundled by the Temporal worker).
export { videoJobWorkflow, cancelSignal, stageQuery } from './video';
export { webhookDeliveryWorkflow } from './webhookDelivery';
export { batchJobWorkflow, batchCancelSignal, batchStageQuery } from './batch';
export { backgroundResponseWorkflow, backgroundCancelSignal } from './backgroundResponse';
export { reconcileProviderDayWorkflow } from './reconcile';
export { topupOrderWorkflow, topupPaidSignal, topupStatementWorkflow } from './topup';
