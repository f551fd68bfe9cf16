import { count, num } from '../settings';
import type { BatchTiming } from './workflowContract';

/**
 * Batch execution settings (BATCH_* env vars). The API copies the timing part into each workflow's input, so a
 * running batch keeps the timing it started with.
 */
export interface BatchSettings {
  /** Requests of one batch in flight at once (per worker running its chunk). */
  concurrency: number;
  /**
   * Chunks of one account's batches running at once, over all worker processes: an account with many or huge
   * batches waits for its own chunks, never holding the worker from other accounts' batches.
   */
  accountChunks: number;
  /** Lines per chunk: one activity runs a chunk, commits its charges and output part, then the next starts. */
  chunkLines: number;
  /**
   * The share (0-1] of its key's requests and tokens per minute a batch may take; interactive traffic keeps the
   * rest.
   */
  keyLimitShare: number;
  /** How long after creation an unfinished batch expires (the API's completion_window is "24h"; tests shrink it). */
  completionWindowMs: number;
  activityRetryInitialMs: number;
  activityRetryMaxMs: number;
  /** Per-attempt limit of a chunk (ms); chunks heartbeat, so a dead worker is noticed after heartbeatMs. */
  chunkTimeoutMs: number;
  heartbeatMs: number;
  /** Database and storage steps (ms). */
  activityTimeoutMs: number;
  /** How long POST /v1/batches/{id}/cancel waits for the batch to reach cancelled (ms). */
  cancelWaitMs: number;
  /** Between two status reads of a batch running on its provider's own batch API (ms). */
  nativePollMs: number;
}

export const DAY_MS = 24 * 3600_000;

export function loadBatchSettings(env: NodeJS.ProcessEnv = process.env): BatchSettings {
  const s: BatchSettings = {
    concurrency: count(env, 'BATCH_CONCURRENCY', 16),
    accountChunks: count(env, 'BATCH_ACCOUNT_CHUNKS', 4),
    chunkLines: count(env, 'BATCH_CHUNK_LINES', 500),
    keyLimitShare: num(env, 'BATCH_KEY_LIMIT_SHARE', 0.5),
    completionWindowMs: num(env, 'BATCH_COMPLETION_WINDOW_MS', DAY_MS),
    activityRetryInitialMs: num(env, 'BATCH_RETRY_INITIAL_MS', 1_000),
    activityRetryMaxMs: num(env, 'BATCH_RETRY_MAX_MS', 60_000),
    chunkTimeoutMs: num(env, 'BATCH_CHUNK_TIMEOUT_MS', 30 * 60_000),
    heartbeatMs: num(env, 'BATCH_HEARTBEAT_MS', 30_000),
    activityTimeoutMs: num(env, 'BATCH_ACTIVITY_TIMEOUT_MS', 10 * 60_000),
    cancelWaitMs: num(env, 'BATCH_CANCEL_WAIT_MS', 5_000),
    nativePollMs: num(env, 'BATCH_NATIVE_POLL_MS', 30_000),
  };
  if (s.keyLimitShare > 1) throw new Error('BATCH_KEY_LIMIT_SHARE must be at most 1');
  return s;
}

export function batchTiming(s: BatchSettings): BatchTiming {
  return {
    activityRetryInitialMs: s.activityRetryInitialMs,
    activityRetryMaxMs: s.activityRetryMaxMs,
    chunkTimeoutMs: s.chunkTimeoutMs,
    heartbeatMs: s.heartbeatMs,
    activityTimeoutMs: s.activityTimeoutMs,
    nativePollMs: s.nativePollMs,
  };
}
