/**
 * Background responses, a job kind (docs/background-responses.md): POST /v1/responses with background: true, run
 * by a workflow and followed by the client. The room's one entrance for the rest of src/: code outside
 * src/jobs/backgroundResponses/ imports only this file, but workflows/index.ts (the workflow, ./workflow.ts) and
 * activities/index.ts (./activities.ts), the worker's entry points. Nothing here loads a Temporal package.
 */
export * as backgroundRepo from './repo';
export { loadBackgroundResponseSettings, backgroundRunTaskQueue, type BackgroundResponseSettings } from './settings';
export { BACKGROUND_WORKFLOW_TYPE, type BackgroundStatus } from './workflowContract';
export { cancelBackgroundResponse, createBackgroundResponse, responseView } from './service';
export { followEvents } from './follow';
export { verifyBackgroundResponses } from './verify';
export { reconcileBackgroundResponses } from './reconciler';
