/**
 * Webhook deliveries, a job kind (docs/webhooks.md): endpoints, events (once per key), Standard Webhooks signing and
 * the delivery of each event. The room's one entrance for the rest of src/: code outside src/jobs/webhooks/ imports
 * only this file, but workflows/index.ts (the workflow, ./workflow.ts) and activities/index.ts (./activities.ts),
 * the worker's entry points. Nothing here loads a Temporal package.
 */
export type { WebhookActivities, WebhookActivityDeps } from './activities';
export { loadWebhookSettings, webhookTaskQueue, deliveryLimits, type WebhookSettings } from './settings';
export { DELIVERY_WORKFLOW_TYPE } from './workflowContract';
export type { EventType } from './eventTypes';
export { webhookService } from './service';
export {
  checkDescription,
  checkEndpointUrl,
  createEndpoint,
  deleteEndpoint,
  endpointView,
  listEndpoints,
  parseEventTypes,
  rotateSecret,
} from './endpoints';
export { eventIdOf, recordEventIn, type DeliveryRef } from './repo';
export { startDelivery } from './start';
export { signedHeaders } from './send';
export { reconcileDeliveries, type DeliveryReconcileCursor } from './reconciler';
