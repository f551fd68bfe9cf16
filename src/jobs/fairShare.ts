import type { Priority } from '@temporalio/common';

/**
 * Tenants share the job engine fairly, whatever the kind of job (issue 46). Every job's workflow is started with
 * its account as Temporal's fairness key: its workflow tasks and its activities (which inherit the workflow's
 * priority, on whichever task queue they run: the jobs' queue, the background runs', the deliveries') are
 * dispatched from a backlog in turns between the accounts that have tasks waiting, each account with an equal
 * share, rather than first come, first served. One account's burst of 300 background responses then queues behind
 * its own tasks, not before another account's one-line batch. Tasks that do not wait (slots free) are not held.
 *
 * The server must have fairness on, in one partition per task queue (FAIRNESS_DYNAMIC_CONFIG: set by the dev servers
 * the gateway starts and config/temporal-dynamicconfig.yaml; a server without it ignores the keys), and workflow
 * tasks must wait in their queue, not on a worker's sticky queue, where Temporal keeps no turns: the workers cache no
 * workflow (JOBS_WORKFLOW_CACHE). What holds a slot for long takes one of its account's (src/jobs/jobSlots.ts): a
 * batch's chunks, a webhook's tries. docs/architecture.md, "Fairness", has what was measured.
 */

/** Temporal's limit on a fairness key's length (bytes); account ids are UUIDs, far below it. */
const MAX_KEY_BYTES = 64;

/** The priority a job of `accountId` is started with: its account's fair share of every queue its tasks wait in. */
export function fairShare(accountId: string): { priority: Priority } {
  return { priority: { fairnessKey: Buffer.from(accountId).subarray(0, MAX_KEY_BYTES).toString() } };
}

/** The dynamic config a Temporal server needs for fairness keys to be honoured (server 1.29 and later). */
export const FAIRNESS_DYNAMIC_CONFIG: Record<string, string> = {
  'matching.enableFairness': 'true',
  'matching.useNewMatcher': 'true',
  // Turns are kept per partition: with Temporal's default of 4, another account's job was taken 12th-28th of 31.
  'matching.numTaskqueueReadPartitions': '1',
  'matching.numTaskqueueWritePartitions': '1',
};
