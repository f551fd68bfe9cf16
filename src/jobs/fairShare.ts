import type { Priority } from '@temporalio/common';

/**
 * Tenants share the job engine fairly, whatever the kind of job (issue 46). Every job's workflow is started with
 * its account as Temporal's fairness key: its workflow tasks and its activities (which inherit the workflow's
 * priority, on whichever task queue they run: the jobs' queue, the background runs', the deliveries') are
 * dispatched from a backlog in turns between the accounts that have tasks waiting, each account with an equal
 * share, rather than first come, first served. One account's burst of 300 background responses then queues behind
 * its own tasks, not before another account's one-line batch. Tasks that do not wait (slots free) are not held.
 *
 * The server must have fairness on (dynamic config `matching.enableFairness` and `matching.useNewMatcher`,
 * `FAIRNESS_DYNAMIC_CONFIG`: the dev servers the gateway starts set them, and config/temporal-dynamicconfig.yaml
 * docker-compose's server). A server without them ignores the keys and dispatches first come, first served.
 *
 * What a slot holds for long is shared by caps of its own (src/jobs/jobSlots.ts): a batch's chunks and a
 * webhook's tries take one of their account's slots.
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
  // Server 1.32's dev server honoured the keys only with the new matcher on as well (fairness alone: the other
  // account's job was taken 23rd of 31; with it, 1st or 2nd: test/integration/fair-dispatch.test.ts).
  'matching.useNewMatcher': 'true',
};
