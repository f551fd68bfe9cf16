// Activities are built from injected dependencies (see src/worker.ts).
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
export { createTopupActivities, type TopupActivities } from '../src/jobs/topups';
