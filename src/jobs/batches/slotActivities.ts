import type { Db } from '../../db';
import type { BatchSettings } from './settings';
import { acquireSlots, releaseSlots } from '../jobSlots';

/**
 * An account's fair share of batch capacity (src/jobs/batches/workflow.ts): before each chunk a batch takes one of its
 * account's BATCH_ACCOUNT_CHUNKS slots (src/jobs/jobSlots.ts), and gives it back after the chunk, so the account's
 * other batches, and its other chunks, take turns. A batch that gets none waits on a workflow timer, holding no
 * activity slot of the worker.
 */

export interface BatchSlotArgs {
  batchId: string;
  accountId: string;
}

const slot = (s: BatchSettings, accountId: string) => ({
  scope: 'batch-account',
  key: accountId,
  cap: s.accountChunks,
});

export function createBatchSlotActivities(deps: { db: Db; settings: BatchSettings }) {
  const { db, settings } = deps;
  return {
    /** Takes a slot for the batch's next chunk; false when the account's chunks in flight are at their cap. */
    async acquireBatchSlot(a: BatchSlotArgs): Promise<{ granted: boolean }> {
      // The lease outlives a chunk's attempt (it is given back at the chunk's end): it only frees a dead batch's.
      const leaseMs = 2 * settings.chunkTimeoutMs;
      // A waiting batch asks again within 10 s (src/jobs/batches/workflow.ts): its place in the queue outlasts that.
      const g = await acquireSlots(db, [slot(settings, a.accountId)], a.batchId, leaseMs, 120_000);
      return { granted: g.granted };
    },
    async releaseBatchSlot(a: BatchSlotArgs): Promise<void> {
      await releaseSlots(db, [slot(settings, a.accountId)], a.batchId);
    },
  };
}

export type BatchSlotActivities = ReturnType<typeof createBatchSlotActivities>;
