import { num } from '../video/settings';

/**
 * Webhook settings (WEBHOOK_* env vars). Retry timing is copied into each delivery workflow's input, so a delivery
 * keeps the schedule it started with.
 */
export interface WebhookSettings {
  /** Endpoints may be http:// and resolve to private or loopback addresses (tests, internal services). */
  allowPrivateUrls: boolean;
  /** Per-try limit of one POST, ms. */
  timeoutMs: number;
  retry: RetrySchedule;
  /** Endpoints per account. */
  maxEndpoints: number;
  /** How long the secret before a rotation still signs (a second v1 signature), ms. */
  rotationGraceMs: number;
}

/** Exponential backoff from initialMs, doubling up to maxMs, until windowMs after the delivery started. */
export interface RetrySchedule {
  initialMs: number;
  maxMs: number;
  windowMs: number;
}

export const DAY_MS = 24 * 3600_000;

export function loadWebhookSettings(env: NodeJS.ProcessEnv = process.env): WebhookSettings {
  const flag = (env.WEBHOOK_ALLOW_PRIVATE_URLS ?? 'false').trim().toLowerCase();
  if (flag !== 'true' && flag !== 'false' && flag !== '')
    throw new Error(`WEBHOOK_ALLOW_PRIVATE_URLS must be true or false, got ${JSON.stringify(flag)}`);
  return {
    allowPrivateUrls: flag === 'true',
    timeoutMs: num(env, 'WEBHOOK_TIMEOUT_MS', 10_000),
    retry: {
      initialMs: num(env, 'WEBHOOK_RETRY_INITIAL_MS', 10_000),
      maxMs: num(env, 'WEBHOOK_RETRY_MAX_MS', 3600_000),
      windowMs: num(env, 'WEBHOOK_RETRY_WINDOW_MS', DAY_MS),
    },
    maxEndpoints: num(env, 'WEBHOOK_MAX_ENDPOINTS', 20),
    rotationGraceMs: num(env, 'WEBHOOK_ROTATION_GRACE_MS', DAY_MS),
  };
}
