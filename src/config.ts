import path from 'node:path';
import { projectRoot } from './projectRoot';
import { loadVideoSettings, type VideoSettings } from './jobs/video/settings';
import { loadRoutingSettings, type RoutingSettings } from './modelCall/settings';
import { loadWebhookSettings, type WebhookSettings } from './jobs/webhooks/settings';
import { loadBatchSettings, type BatchSettings } from './jobs/batches/settings';
import { loadBackgroundResponseSettings, type BackgroundResponseSettings } from './jobs/backgroundResponses/settings';
import { loadJobWorkerSettings, type JobWorkerSettings } from './jobs/settings';
import { loadTopupSettings, type TopupSettings } from './jobs/topups/settings';
import { checkTimeZone, DEFAULT_BUDGET_TIME_ZONE, setBudgetTimeZone } from './billing/budget';

function int(name: string, def: number): number {
  const v = process.env[name];
  if (v === undefined || v === '') return def;
  const n = Number(v);
  if (!Number.isInteger(n)) throw new Error(`${name} must be an integer, got ${JSON.stringify(v)}`);
  return n;
}
/** A count that must be at least 1 (a pool of no sockets would hang every request). */
function positive(name: string, n: number): number {
  if (n < 1) throw new Error(`${name} must be at least 1, got ${n}`);
  return n;
}
function str(name: string, def: string): string {
  const v = process.env[name];
  return v === undefined || v === '' ? def : v;
}

/** A TCP port, or null when the variable is `0` or `off` (the listener is disabled). */
function optionalPort(name: string, def: number): number | null {
  const v = process.env[name]?.trim();
  if (v === undefined || v === '') return def;
  if (v === '0' || v.toLowerCase() === 'off') return null;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1 || n > 65535)
    throw new Error(`${name} must be a port (1-65535), 0 or off, got ${JSON.stringify(v)}`);
  return n;
}

export interface Config {
  port: number;
  host: string;
  databaseUrl: string;
  temporalAddress: string;
  temporalNamespace: string;
  temporalTaskQueue: string;
  temporalUiUrl: string;
  catalogPath: string;
  storageDriver: 'fs' | 's3';
  storageDir: string;
  s3: { bucket: string; endpoint?: string; region: string; forcePathStyle: boolean };
  /** The gateway's public URL: absolute URLs in answers are built from it (never from the client's Host header). */
  publicBaseUrl: string;
  /** Behind a trusted reverse proxy: X-Forwarded-Proto/-Host/-For are believed (TRUST_PROXY). */
  trustProxy: boolean;
  logLevel: string;
  /**
   * How long a request body may take to arrive, from the start of its read (BODY_TIMEOUT_MS): a client that stops
   * sending mid-body gets a 408 and its connection closed instead of holding it for minutes.
   */
  bodyTimeoutMs: number;
  /** Max JSON body, bytes (messages/responses bodies from coding clients reach a few MB). */
  maxJsonBytes: number;
  maxUploadBytes: number;
  /** Largest batch input file POST /v1/files takes (OpenAI's limit: 200 MB). */
  maxBatchFileBytes: number;
  /** How often the worker removes the stored bytes of deleted and expired files (src/files/sweep.ts). */
  fileSweepIntervalMs: number;
  /**
   * Max sockets from this process to each upstream origin (UPSTREAM_CONNECTIONS): a streamed answer holds one for its
   * whole length, so it bounds the concurrent streams per provider; requests beyond it wait for a free socket.
   */
  upstreamConnections: number;
  /** JSON body limit of POST /v1/videos (inline base64 images: up to 10 MB each, plus up to 9 reference images). */
  maxVideoJsonBytes: number;
  /** JSON body limit of POST /v1/messages/batches (all of a message batch's requests in one body). */
  maxMessageBatchJsonBytes: number;
  /** VND reserved per credit lease (see billing/credit.ts). */
  creditLeaseVnd: number;
  creditFlushMs: number;
  /** A credit lease stops taking new reservations after this long and is replaced (rotation). */
  creditLeaseTtlMs: number;
  /**
   * Heartbeat period of a process holding credit leases; a process silent for three periods has its leases
   * recovered by the others (billing/creditHolders.ts).
   */
  creditLivenessMs: number;
  /** How often each process looks for price versions that took effect (src/billing/priceBook.ts). */
  priceRefreshMs: number;
  /** Workers create the daily reconciliation schedules (src/jobs/reconcile/schedule.ts). */
  reconcileSchedule: boolean;
  keyCacheMs: number;
  /** Hosts URL inputs may be fetched from even though they resolve to private addresses (local development). */
  fetchAllowHosts: string[];
  consoleSecureCookies: boolean;
  /** Organization invitations are mailed through this SMTP server (smtp[s]://...); null: shown as links. */
  smtpUrl: string | null;
  /** The From address of those mails. */
  mailFrom: string;
  /** How long an organization invitation can be accepted. */
  inviteTtlMs: number;
  /** Redis for rate limits shared by all API processes; null: an in-process limiter (one API process). */
  redisUrl: string | null;
  redisKeyPrefix: string;
  /** How long a rate-limit check waits for Redis before deciding in-process. */
  rateLimitRedisTimeoutMs: number;
  /** The zone of the calendar days and months of key budgets. */
  budgetTimeZone: string;
  /** Port of the worker's own GET /metrics (`npm run worker`); null: none (WORKER_METRICS_PORT `0` or `off`). */
  workerMetricsPort: number | null;
  /** Video job timing (src/jobs/video/settings.ts; VIDEO_* env vars). */
  video: VideoSettings;
  /** Retries, fallbacks and cooldowns across deployments (src/modelCall/settings.ts; ROUTING_* env vars). */
  routing: RoutingSettings;
  /** Endpoint checks, per-try timeout and retry schedule of webhooks (src/jobs/webhooks/settings.ts; WEBHOOK_*). */
  webhooks: WebhookSettings;
  /** Batch execution: concurrency, chunks, the key's share, timing (src/jobs/batches/settings.ts; BATCH_* env vars). */
  batches: BatchSettings;
  /** Background responses: in-flight limit, event retention, timing (src/jobs/backgroundResponses/settings.ts). */
  backgroundResponses: BackgroundResponseSettings;
  /** The jobs' worker and the webhook delivery worker: their shutdown grace (src/jobs/settings.ts; JOBS_* env vars). */
  jobs: JobWorkerSettings;
  /** Top-ups: order bounds, the receiving account, the feeds' and VNPay's credentials (src/jobs/topups/settings.ts). */
  topups: TopupSettings;
  /** The exact response cache (src/cache/, docs/cache.md; CACHE_* env vars). */
  cache: CacheSettings;
}

/** The response cache's operator settings (docs/cache.md). */
export interface CacheSettings {
  /** CACHE_ENABLED=false turns the cache off for every account and request. */
  enabled: boolean;
  /** VND charged per hit (CACHE_HIT_PRICE_VND, default 0: a hit costs nothing). */
  hitPriceVnd: number;
  /** Largest TTL an account or a request may set (CACHE_MAX_TTL_SECONDS, default 7 days). */
  maxTtlSeconds: number;
  /** Answers larger than this are not stored (CACHE_MAX_ENTRY_BYTES, default 1 MiB). */
  maxEntryBytes: number;
  /** Postgres storage: total size kept by evicting the oldest entries (CACHE_MAX_TOTAL_BYTES, default 256 MiB). */
  maxTotalBytes: number;
  /** How long a lookup or write may take before the request goes on as a miss (CACHE_TIMEOUT_MS). */
  timeoutMs: number;
  /** Key prefix in Redis (CACHE_REDIS_PREFIX). */
  redisPrefix: string;
  /** How long an account's cache settings are kept in memory (CACHE_SETTINGS_MS). */
  settingsCacheMs: number;
  /** How long a new entry waits to be written with the others (CACHE_FLUSH_MS, default 1000; docs/cache.md). */
  flushMs?: number;
  /** Projects with Prometheus series of their own, per API process; the rest: `other` (CACHE_METRICS_MAX_PROJECTS). */
  metricsMaxProjects?: number;
}

export function loadConfig(overrides: Partial<Config> = {}): Config {
  const root = projectRoot();
  const port = int('PORT', 8080);
  const cfg: Config = {
    port,
    host: str('HOST', '0.0.0.0'),
    databaseUrl: str('DATABASE_URL', 'postgres://postgres@127.0.0.1:5432/gateway'),
    temporalAddress: str('TEMPORAL_ADDRESS', '127.0.0.1:7233'),
    temporalNamespace: str('TEMPORAL_NAMESPACE', 'default'),
    temporalTaskQueue: str('TEMPORAL_TASK_QUEUE', 'video-jobs'),
    temporalUiUrl: str('TEMPORAL_UI_URL', 'http://127.0.0.1:8233'),
    catalogPath: str('CATALOG_PATH', path.join(root, 'config', 'catalog.json')),
    storageDriver: str('STORAGE_DRIVER', 'fs') === 's3' ? 's3' : 'fs',
    storageDir: str('STORAGE_DIR', path.join(root, '.data', 'media')),
    s3: {
      bucket: str('S3_BUCKET', 'gateway-media'),
      endpoint: process.env.S3_ENDPOINT || undefined,
      region: str('S3_REGION', 'us-east-1'),
      forcePathStyle: str('S3_FORCE_PATH_STYLE', 'true') === 'true',
    },
    publicBaseUrl: str('PUBLIC_BASE_URL', `http://127.0.0.1:${port}`).replace(/\/+$/, ''),
    trustProxy: str('TRUST_PROXY', 'false') === 'true',
    logLevel: str('LOG_LEVEL', 'info'),
    bodyTimeoutMs: int('BODY_TIMEOUT_MS', 30_000),
    maxJsonBytes: int('MAX_JSON_BYTES', 8 * 1024 * 1024),
    maxUploadBytes: int('MAX_UPLOAD_BYTES', 25 * 1024 * 1024),
    maxBatchFileBytes: int('MAX_BATCH_FILE_BYTES', 200 * 1024 * 1024),
    fileSweepIntervalMs: int('FILE_SWEEP_INTERVAL_MS', 600_000),
    upstreamConnections: positive('UPSTREAM_CONNECTIONS', int('UPSTREAM_CONNECTIONS', 256)),
    maxVideoJsonBytes: int('MAX_VIDEO_JSON_BYTES', 64 * 1024 * 1024),
    maxMessageBatchJsonBytes: int('MAX_MESSAGE_BATCH_JSON_BYTES', 32 * 1024 * 1024),
    creditLeaseVnd: int('CREDIT_LEASE_VND', 20000),
    creditFlushMs: int('CREDIT_FLUSH_MS', 200),
    creditLivenessMs: int('CREDIT_LIVENESS_MS', 10_000),
    creditLeaseTtlMs: int('CREDIT_LEASE_TTL_MS', 5 * 60 * 1000),
    priceRefreshMs: int('PRICE_REFRESH_MS', 10_000),
    reconcileSchedule: str('RECONCILE_SCHEDULE', 'true') === 'true',
    keyCacheMs: int('KEY_CACHE_MS', 2000),
    fetchAllowHosts: str('FETCH_ALLOW_HOSTS', '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
    consoleSecureCookies: false, // below: its default follows the final public URL
    smtpUrl: process.env.SMTP_URL || null,
    mailFrom: str('MAIL_FROM', 'gateway@localhost'),
    inviteTtlMs: int('INVITE_TTL_MS', 7 * 24 * 3600 * 1000),
    redisUrl: process.env.REDIS_URL || null,
    redisKeyPrefix: str('REDIS_KEY_PREFIX', 'gw:rl:'),
    rateLimitRedisTimeoutMs: int('RATE_LIMIT_REDIS_TIMEOUT_MS', 1000),
    budgetTimeZone: checkTimeZone(str('BUDGET_TIME_ZONE', DEFAULT_BUDGET_TIME_ZONE)),
    workerMetricsPort: optionalPort('WORKER_METRICS_PORT', 9464),
    video: loadVideoSettings(),
    routing: loadRoutingSettings(),
    webhooks: loadWebhookSettings(),
    batches: loadBatchSettings(),
    backgroundResponses: loadBackgroundResponseSettings(),
    jobs: loadJobWorkerSettings(),
    topups: loadTopupSettings(),
    cache: {
      enabled: str('CACHE_ENABLED', 'true') === 'true',
      hitPriceVnd: int('CACHE_HIT_PRICE_VND', 0),
      maxTtlSeconds: int('CACHE_MAX_TTL_SECONDS', 7 * 24 * 3600),
      maxEntryBytes: int('CACHE_MAX_ENTRY_BYTES', 1024 * 1024),
      maxTotalBytes: int('CACHE_MAX_TOTAL_BYTES', 256 * 1024 * 1024),
      timeoutMs: int('CACHE_TIMEOUT_MS', 250),
      redisPrefix: str('CACHE_REDIS_PREFIX', 'gw:cache:'),
      settingsCacheMs: int('CACHE_SETTINGS_MS', 2000),
      flushMs: int('CACHE_FLUSH_MS', 1000),
      metricsMaxProjects: int('CACHE_METRICS_MAX_PROJECTS', 100),
    },
  };
  const out = { ...cfg, ...overrides };
  // A gateway served over https marks its console cookies Secure unless told otherwise.
  if (overrides.consoleSecureCookies === undefined)
    out.consoleSecureCookies = str('CONSOLE_SECURE_COOKIES', String(out.publicBaseUrl.startsWith('https:'))) === 'true';
  // The ledger attributes charges to budget periods in every process that writes them (API, worker, CLI): set
  // here, where each of them reads its configuration.
  setBudgetTimeZone(out.budgetTimeZone);
  return out;
}
