/**
 * The event types an endpoint can subscribe to, named as OpenAI names its webhook events (`<object>.<change>`).
 * A new family (batches) adds its types here and emits them through the same activity.
 */
export const EVENT_TYPES = [
  'video.processing',
  'video.completed',
  'video.failed',
  'video.expired',
  'video.cancelled',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];
