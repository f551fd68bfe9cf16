// Activities are built from injected dependencies (src/jobs/kinds.ts builds them for src/worker.ts). Each job kind
// implements its own in src/jobs/<kind>/; this entry point is the one place outside a kind that reaches them.
export { createVideoActivities, type VideoActivityDeps } from '../src/jobs/video/activities';
export {
  createWebhookActivities,
  type WebhookActivities,
  type WebhookActivityDeps,
} from '../src/jobs/webhooks/activities';
export { createBatchActivities, type BatchActivities, type BatchActivityDeps } from '../src/jobs/batches/activities';
export { createBatchNativeActivities, type BatchNativeActivities } from '../src/jobs/batches/nativeActivities';
export { createBatchSlotActivities, type BatchSlotActivities } from '../src/jobs/batches/slotActivities';
export { createBackgroundActivities, type BackgroundActivityDeps } from '../src/jobs/backgroundResponses/activities';
export { createReconcileActivities } from '../src/jobs/reconcile/activities';
export { createTopupActivities } from '../src/jobs/topups/activities';
export type { TopupActivities } from '../src/jobs/topups/activities';
