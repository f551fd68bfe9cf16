/**
 * What every job type's workflow sets the same way for its activities, from the timing the job started with (its
 * input, so a job keeps its options whatever the settings become): retries back off from activityRetryInitialMs,
 * doubling up to activityRetryMaxMs; database steps (status, charges, releases, events) must eventually succeed, so
 * they are retried without limit. Each workflow adds its own kinds of step (upstream call, copy, chunk) at its top.
 */
export interface JobRetryTiming {
  activityRetryInitialMs: number;
  activityRetryMaxMs: number;
  activityTimeoutMs: number;
}

export function jobRetry(t: JobRetryTiming) {
  return { initialInterval: t.activityRetryInitialMs, backoffCoefficient: 2, maximumInterval: t.activityRetryMaxMs };
}

export function dbStep(t: JobRetryTiming) {
  return { startToCloseTimeout: t.activityTimeoutMs, retry: jobRetry(t) };
}
