/**
 * Batches, a job kind (docs/batches.md): OpenAI's Batch API and Anthropic's Message Batches. The room's one entrance
 * for the rest of src/: code outside src/jobs/batches/ imports only this file, but workflows/index.ts (the workflow,
 * ./workflow.ts) and activities/index.ts (./activities.ts, ./nativeActivities.ts, ./slotActivities.ts), the
 * worker's entry points. Nothing here loads a Temporal package.
 */
export * as batchRepo from './repo';
export { BATCH_STATUSES, getBatchForAccount, type BatchStatus } from './repo';
export { loadBatchSettings, type BatchSettings } from './settings';
export { BATCH_WORKFLOW_TYPE } from './workflowContract';
export { cancelBatch, createBatch, parseCreateBody } from './service';
export { uploadLineCheck } from './lineLimits';
export {
  isEnded,
  MESSAGES_ENDPOINT,
  messageBatchLines,
  messageBatchView,
  resultOf,
  unrunResult,
} from './messageBatches';
export { reconcileBatches } from './reconciler';

export {
  createMessageBatch,
  deleteMessageBatch,
  listMessageBatches,
  messageBatchResults,
  ranFailed,
} from './messageBatchStore';
