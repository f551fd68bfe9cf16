import { count, num } from '../settings';

/**
 * Webhook settings (WEBHOOK_* env vars). Retry timing is copied into each delivery workflow's input, so a delivery
 * keeps the schedule it started with.
 */
export interface WebhookSettings {
  /** Endpoints may be http:// and resolve to private or loopback addresses (tests, internal services). */
  allowPrivateUrls: boolean;
  /**
   * The ports an endpoint URL may name (WEBHOOK_ALLOWED_PORTS, comma-separated; default 443 only): a receiver on
   * another port is usually something else. Where private URLs are allowed (tests, internal services), any port
   * from 1 to 65535 is. Unset: 443.
   */
  allowedPorts?: number[];
  /** Per-try limit of one POST, ms. */
  timeoutMs: number;
  retry: RetrySchedule;
  /** Endpoints per account. */
  maxEndpoints: number;
  /** How long the secret before a rotation still signs (a second v1 signature), ms. */
  rotationGraceMs: number;
  /**
   * Fair shares (deliveryLimits() fills what is left out): deliveries have a task queue and activity slots of their
   * own, and each account a cap on its tries in flight; resends are limited per account and per delivery.
   */
  limits?: Partial<DeliveryLimits>;
}

export interface DeliveryLimits {
  /** The deliveries' task queue (default: the worker's task queue + `-webhooks`). */
  taskQueue: string | null;
  /** Tries in flight at once per worker process (its delivery worker's activity slots). */
  concurrency: number;
  /** Tries in flight at once per account, over all worker processes. */
  accountConcurrency: number;
  /** Resends per account in any minute. */
  resendsPerMinute: number;
  /** Least time between two resends of one delivery, ms. */
  resendIntervalMs: number;
}

export const DEFAULT_DELIVERY_LIMITS: DeliveryLimits = {
  taskQueue: null,
  concurrency: 100,
  accountConcurrency: 10,
  resendsPerMinute: 30,
  resendIntervalMs: 30_000,
};

export const deliveryLimits = (s: WebhookSettings): DeliveryLimits => ({ ...DEFAULT_DELIVERY_LIMITS, ...s.limits });

/** The task queue delivery workflows run on, beside the worker's own queue (`temporalTaskQueue`). */
export const webhookTaskQueue = (c: { temporalTaskQueue: string; webhooks: WebhookSettings }): string =>
  deliveryLimits(c.webhooks).taskQueue ?? `${c.temporalTaskQueue}-webhooks`;

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
    allowedPorts: ports(env.WEBHOOK_ALLOWED_PORTS),
    timeoutMs: num(env, 'WEBHOOK_TIMEOUT_MS', 10_000),
    retry: {
      initialMs: num(env, 'WEBHOOK_RETRY_INITIAL_MS', 10_000),
      maxMs: num(env, 'WEBHOOK_RETRY_MAX_MS', 3600_000),
      windowMs: num(env, 'WEBHOOK_RETRY_WINDOW_MS', DAY_MS),
    },
    maxEndpoints: num(env, 'WEBHOOK_MAX_ENDPOINTS', 20),
    rotationGraceMs: num(env, 'WEBHOOK_ROTATION_GRACE_MS', DAY_MS),
    limits: {
      taskQueue: env.WEBHOOK_TASK_QUEUE?.trim() || null,
      concurrency: count(env, 'WEBHOOK_CONCURRENCY', DEFAULT_DELIVERY_LIMITS.concurrency),
      accountConcurrency: count(env, 'WEBHOOK_ACCOUNT_CONCURRENCY', DEFAULT_DELIVERY_LIMITS.accountConcurrency),
      resendsPerMinute: count(env, 'WEBHOOK_RESENDS_PER_MINUTE', DEFAULT_DELIVERY_LIMITS.resendsPerMinute),
      resendIntervalMs: num(env, 'WEBHOOK_RESEND_INTERVAL_MS', DEFAULT_DELIVERY_LIMITS.resendIntervalMs),
    },
  };
}

/** WEBHOOK_ALLOWED_PORTS: comma-separated ports, 1 to 65535 (unset or empty: 443). */
export function ports(v: string | undefined): number[] {
  if (v === undefined || v.trim() === '') return [443];
  return v.split(',').map((p) => {
    const n = Number(p.trim());
    if (!Number.isInteger(n) || n < 1 || n > 65535)
      throw new Error(`WEBHOOK_ALLOWED_PORTS: ${JSON.stringify(p.trim())} is not a port from 1 to 65535`);
    return n;
  });
}

/** The port of an endpoint URL, its scheme's default when it names none. */
export const portOf = (u: URL): number => (u.port === '' ? (u.protocol === 'http:' ? 80 : 443) : Number(u.port));

/** Whether webhooks may go to this URL's port under these settings. */
export function portAllowed(u: URL, s: Pick<WebhookSettings, 'allowPrivateUrls' | 'allowedPorts'>): boolean {
  const port = portOf(u);
  if (port < 1 || port > 65535) return false;
  return s.allowPrivateUrls || (s.allowedPorts ?? [443]).includes(port);
}
