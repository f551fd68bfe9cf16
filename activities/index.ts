// Activities are built from injected dependencies (see src/worker.ts).
export { createVideoActivities, type VideoActivityDeps } from './video';
export { createWebhookActivities, type WebhookActivities, type WebhookActivityDeps } from './webhookDelivery';
export { createBatchActivities, type BatchActivities, type BatchActivityDeps } from './batch';
export { createBatchNativeActivities, type BatchNativeActivities } from './batchNative';
export { createBatchSlotActivities, type BatchSlotActivities } from './batchSlots';
export { createBackgroundActivities, type BackgroundActivityDeps } from './backgroundResponse';
export { createTopupActivities, type TopupActivities } from './topup';
