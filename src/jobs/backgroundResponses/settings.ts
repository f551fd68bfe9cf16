import { count, ms, num, SHUTDOWN_GRACE_MS } from '../settings';
import type { BackgroundTiming } from './workflowContract';

/**
 * Background responses (BACKGROUND_* env vars; docs/background-responses.md). The API copies the timing part into
 * each workflow's input, so a running response keeps the timing it started with.
 */
export interface BackgroundResponseSettings extends BackgroundTiming {
  /** Background responses of one API key queued or in progress at once; one more is refused with 429. */
  maxInFlightPerKey: number;
  /** How long a response's stored events are kept after it ended (ms); then only the Response object remains. */
  eventsRetentionMs: number;
  /** How often a stream follower (POST stream:true, GET ?stream=true) reads the events table for new ones (ms). */
  followPollMs: number;
  /** How long POST /v1/responses/{id}/cancel waits for the response to reach cancelled (ms). */
  cancelWaitMs: number;
  /**
   * Upstream calls of background responses the worker runs at once (BACKGROUND_CONCURRENCY): the activity slots of
   * the background runs' worker, and its sockets to each upstream origin. More wait `in_progress` in its queue.
   */
  concurrency: number;
  /** Database connections of the background runs' worker (BACKGROUND_DB_CONNECTIONS): held only while storing. */
  dbConnections: number;
  /** Its task queue (BACKGROUND_TASK_QUEUE; default `<TEMPORAL_TASK_QUEUE>-background`). */
  taskQueue: string | null;
  /**
   * How long the background runs' worker lets its runs in flight finish when the process stops (a deploy's
   * SIGTERM), BACKGROUND_SHUTDOWN_GRACE_MS: the Temporal worker's shutdownGraceTime. A run cut short is retried by
   * another worker and its provider paid twice; the runs still going when it ends are cut short (lost, retried).
   * Default 25 s (SHUTDOWN_GRACE_MS, src/jobs/settings.ts); 0: cut short at once.
   */
  shutdownGraceMs: number;
}

const DAY_MS = 24 * 3600_000;

export function loadBackgroundResponseSettings(env: NodeJS.ProcessEnv = process.env): BackgroundResponseSettings {
  return {
    maxInFlightPerKey: count(env, 'BACKGROUND_MAX_IN_FLIGHT_PER_KEY', 100),
    eventsRetentionMs: num(env, 'BACKGROUND_EVENTS_RETENTION_MS', 30 * DAY_MS),
    followPollMs: num(env, 'BACKGROUND_FOLLOW_POLL_MS', 100),
    cancelWaitMs: num(env, 'BACKGROUND_CANCEL_WAIT_MS', 5_000),
    concurrency: Math.max(1, Math.floor(num(env, 'BACKGROUND_CONCURRENCY', 1_000))),
    dbConnections: Math.max(1, Math.floor(num(env, 'BACKGROUND_DB_CONNECTIONS', 10))),
    taskQueue: env.BACKGROUND_TASK_QUEUE?.trim() || null,
    shutdownGraceMs: ms(env, 'BACKGROUND_SHUTDOWN_GRACE_MS', SHUTDOWN_GRACE_MS),
    runTimeoutMs: num(env, 'BACKGROUND_RUN_TIMEOUT_MS', 2 * 3600_000),
    heartbeatMs: num(env, 'BACKGROUND_HEARTBEAT_MS', 30_000),
    runAttempts: count(env, 'BACKGROUND_RUN_ATTEMPTS', 3),
    activityRetryInitialMs: num(env, 'BACKGROUND_RETRY_INITIAL_MS', 1_000),
    activityRetryMaxMs: num(env, 'BACKGROUND_RETRY_MAX_MS', 60_000),
    activityTimeoutMs: num(env, 'BACKGROUND_ACTIVITY_TIMEOUT_MS', 60_000),
  };
}

export function backgroundTiming(s: BackgroundResponseSettings): BackgroundTiming {
  return {
    runTimeoutMs: s.runTimeoutMs,
    heartbeatMs: s.heartbeatMs,
    runAttempts: s.runAttempts,
    activityRetryInitialMs: s.activityRetryInitialMs,
    activityRetryMaxMs: s.activityRetryMaxMs,
    activityTimeoutMs: s.activityTimeoutMs,
  };
}

/** The task queue of the background runs' worker (src/runtime/backgroundRunWorker.ts), beside the jobs' queue. */
export const backgroundRunTaskQueue = (c: {
  temporalTaskQueue: string;
  backgroundResponses: Pick<BackgroundResponseSettings, 'taskQueue'>;
}): string => c.backgroundResponses.taskQueue ?? `${c.temporalTaskQueue}-background`;
