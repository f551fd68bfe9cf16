// Workflow definitions (deterministic code only; bundled by the Temporal worker).
export { videoJobWorkflow, cancelSignal, stageQuery } from './videoJob';
export { webhookDeliveryWorkflow } from './webhookDelivery';
export { batchJobWorkflow, batchCancelSignal, batchStageQuery } from './batchJob';
export { backgroundResponseWorkflow, backgroundCancelSignal } from './backgroundResponse';
export { reconcileProviderDayWorkflow } from './reconcile';
