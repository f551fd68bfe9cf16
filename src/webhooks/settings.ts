import { num } from '../video/settings';

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
    allowedPorts: ports(env.WEBHOOK_ALLOWED_PORTS),
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
