import { num } from '../settings';
import type { WorkflowTiming } from './workflowContract';

/**
 * Timing of video jobs. Production defaults are minutes and hours; tests and the bench shrink them. The API
 * copies the workflow's part (WorkflowTiming, documented in the workflow's contract) into each workflow's input,
 * so a running job keeps the timing it started with even if the config changes; the rest is read by the API and
 * the worker.
 */
export interface VideoSettings extends WorkflowTiming {
  /** Reconciler pass interval and the age a job must reach before the reconciler touches it (ms). */
  reconcileIntervalMs: number;
  reconcileGraceMs: number;
  /** How often the worker releases expired holds (ms). */
  holdSweepIntervalMs: number;
  /** How often the worker looks at the duplicate provider tasks it follows to their end (./twins.ts, ms). */
  twinSweepIntervalMs: number;
  /** How long DELETE /v1/videos/{id} waits for the workflow to finish the cancellation (ms). */
  cancelWaitMs: number;
  /** How long a workflow task waits for the worker that cached the workflow before any worker takes it (ms). */
  stickyQueueTimeoutMs: number;
}

const RETENTION_MS = 24 * 3600_000;

export function loadVideoSettings(env: NodeJS.ProcessEnv = process.env): VideoSettings {
  const s: VideoSettings = {
    pollInitialMs: num(env, 'VIDEO_POLL_INITIAL_MS', 5_000),
    pollMaxMs: num(env, 'VIDEO_POLL_MAX_MS', 60_000),
    pollBackoff: num(env, 'VIDEO_POLL_BACKOFF', 1.5),
    deadlineMs: num(env, 'VIDEO_DEADLINE_MS', 3 * 3600_000),
    followWindowMs: num(env, 'VIDEO_FOLLOW_WINDOW_MS', 48 * 3600_000),
    submitWindowMs: num(env, 'VIDEO_SUBMIT_WINDOW_MS', 30 * 60_000),
    copyWindowMs: num(env, 'VIDEO_COPY_WINDOW_MS', 6 * 3600_000),
    activityRetryInitialMs: num(env, 'VIDEO_RETRY_INITIAL_MS', 1_000),
    activityRetryMaxMs: num(env, 'VIDEO_RETRY_MAX_MS', 5 * 60_000),
    activityTimeoutMs: num(env, 'VIDEO_ACTIVITY_TIMEOUT_MS', 60_000),
    copyAttemptTimeoutMs: num(env, 'VIDEO_COPY_ATTEMPT_TIMEOUT_MS', 60 * 60_000),
    heartbeatMs: num(env, 'VIDEO_HEARTBEAT_MS', 30_000),
    reconcileIntervalMs: num(env, 'VIDEO_RECONCILE_INTERVAL_MS', 30_000),
    reconcileGraceMs: num(env, 'VIDEO_RECONCILE_GRACE_MS', 60_000),
    holdSweepIntervalMs: num(env, 'VIDEO_HOLD_SWEEP_INTERVAL_MS', 60_000),
    twinSweepIntervalMs: num(env, 'VIDEO_TWIN_SWEEP_INTERVAL_MS', 60_000),
    cancelWaitMs: num(env, 'VIDEO_CANCEL_WAIT_MS', 5_000),
    stickyQueueTimeoutMs: num(env, 'VIDEO_STICKY_QUEUE_TIMEOUT_MS', 10_000),
  };
  if (s.copyWindowMs >= RETENTION_MS)
    throw new Error('VIDEO_COPY_WINDOW_MS must be well under the 24 h provider retention');
  return s;
}

export function workflowTiming(s: VideoSettings): WorkflowTiming {
  return {
    pollInitialMs: s.pollInitialMs,
    pollMaxMs: s.pollMaxMs,
    pollBackoff: s.pollBackoff,
    deadlineMs: s.deadlineMs,
    followWindowMs: s.followWindowMs,
    submitWindowMs: s.submitWindowMs,
    copyWindowMs: s.copyWindowMs,
    activityRetryInitialMs: s.activityRetryInitialMs,
    activityRetryMaxMs: s.activityRetryMaxMs,
    activityTimeoutMs: s.activityTimeoutMs,
    copyAttemptTimeoutMs: s.copyAttemptTimeoutMs,
    heartbeatMs: s.heartbeatMs,
  };
}
