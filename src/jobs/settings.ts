/**
 * Reading a job type's settings from the environment: every job type (video, batches, webhook deliveries,
 * background responses) keeps its timings in its own settings module and reads them through this. The settings of
 * the jobs' worker itself (not of one job type) are here too.
 */

/** A positive number from the environment, or `def` when unset. */
export function num(env: NodeJS.ProcessEnv, name: string, def: number): number {
  const v = env[name];
  if (v === undefined || v === '') return def;
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} must be a positive number, got ${JSON.stringify(v)}`);
  return n;
}

/**
 * A count from the environment (rounded down), at least 1, or `def` when unset: 0.5 passes `num` but rounds to none,
 * and none runs nothing (a batch lane, an account's slots) or means no limit (Temporal's maximumAttempts 0).
 */
export function count(env: NodeJS.ProcessEnv, name: string, def: number): number {
  const n = Math.floor(num(env, name, def));
  if (n < 1) throw new Error(`${name} must be a whole number of at least 1, got ${JSON.stringify(env[name])}`);
  return n;
}

/** A whole number that may be 0, or `def` when unset. */
export function whole(env: NodeJS.ProcessEnv, name: string, def: number): number {
  const v = env[name];
  if (v === undefined || v === '') return def;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0)
    throw new Error(`${name} must be a whole number, 0 or more, got ${JSON.stringify(v)}`);
  return n;
}

/** A duration that may be 0 (a shutdown grace of 0: activities are cut short at once), or `def` when unset. */
export function ms(env: NodeJS.ProcessEnv, name: string, def: number): number {
  const v = env[name];
  if (v === undefined || v === '') return def;
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0) throw new Error(`${name} must be 0 or a positive number, got ${JSON.stringify(v)}`);
  return n;
}

/**
 * The default shutdown grace of the worker's Temporal workers, 25 s: it must end before the process is killed.
 * Kubernetes kills a pod 30 s after its SIGTERM (the default terminationGracePeriodSeconds), which leaves the rest
 * of the worker's stop 5 s; docker-compose.yml gives the worker 40 s (stop_grace_period), and `npm start` gives the
 * worker's stop STOP_TIMEOUT_MS beyond the longest grace (src/main.ts). A longer grace needs a longer stop timeout
 * of whatever stops the process. The graces run at once (src/worker.ts), so the stop takes the longest of them.
 */
export const SHUTDOWN_GRACE_MS = 25_000;

/** The jobs' worker (src/worker.ts) and the webhook delivery worker beside it. */
export interface JobWorkerSettings {
  /**
   * How long the jobs' worker and the webhook delivery worker let their activities in flight finish when the
   * process stops (a deploy's SIGTERM), JOBS_SHUTDOWN_GRACE_MS: their Temporal workers' shutdownGraceTime. A video
   * submit cut short is submitted again by another worker (the provider paid twice), a batch chunk commits nothing
   * and leaves its unsent lines to another. Keep it above WEBHOOK_TIMEOUT_MS, so a webhook try in flight gets its
   * answer or its timeout within it. When it ends, the activities still going are cancelled.
   */
  shutdownGraceMs: number;
  /**
   * Activities the jobs' worker runs at once (JOBS_CONCURRENCY, default 200): its activity slots, shared by every
   * kind's steps on the jobs' queue; tasks beyond them wait in the queue, dispatched in turns between accounts
   * (src/jobs/fairShare.ts).
   */
  concurrency: number;
  /**
   * Workflow tasks the jobs' worker and the webhook delivery worker each take at once (JOBS_WORKFLOW_CONCURRENCY,
   * default 40, Temporal's). A worker runs them one after another on one thread, first come, first served, so the
   * fewer it takes, the more of a burst waits in the server's queue, where accounts take turns
   * (src/jobs/fairShare.ts).
   */
  workflowConcurrency: number;
  /**
   * Workflows the jobs' worker and the webhook delivery worker each keep in memory between their tasks
   * (JOBS_WORKFLOW_CACHE, default 0: none; Temporal's maxCachedWorkflows). A cached workflow's next task goes to its
   * worker's sticky queue, which Temporal dispatches first come, first served (fairness is off for sticky queues),
   * so one account's burst held another's every step there, up to the sticky timeout (VIDEO_STICKY_QUEUE_TIMEOUT_MS,
   * at least 1 s) per step. With none, every workflow task waits in the jobs' queue, where accounts take turns, and
   * is replayed from its history (the gateway's workflows are short; a batch's grows with its chunks).
   */
  workflowCache: number;
}

export function loadJobWorkerSettings(env: NodeJS.ProcessEnv = process.env): JobWorkerSettings {
  return {
    shutdownGraceMs: ms(env, 'JOBS_SHUTDOWN_GRACE_MS', SHUTDOWN_GRACE_MS),
    concurrency: count(env, 'JOBS_CONCURRENCY', 200),
    workflowConcurrency: Math.max(2, count(env, 'JOBS_WORKFLOW_CONCURRENCY', 40)),
    workflowCache: whole(env, 'JOBS_WORKFLOW_CACHE', 0),
  };
}
