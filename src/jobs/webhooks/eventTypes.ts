/**
 * The event types an endpoint can subscribe to, named as OpenAI names its webhook events (`<object>.<change>`).
 * Each family (video jobs, batches) emits its types through the same activity (src/jobs/webhooks/activities.ts).
 */
export const EVENT_TYPES = [
  'video.processing',
  'video.completed',
  'video.failed',
  'video.expired',
  'video.cancelled',
  'batch.completed',
  'batch.failed',
  'batch.expired',
  'batch.cancelled',
  'response.completed',
  'response.failed',
  'response.cancelled',
  'response.incomplete',
  'topup.succeeded',
  'balance.low',
  'spend.alert',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];
