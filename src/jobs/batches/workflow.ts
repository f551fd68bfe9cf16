import {
  CancellationScope,
  condition,
  continueAsNew,
  defineQuery,
  defineSignal,
  patched,
  proxyActivities,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { BatchNativeActivities, NativeTarget } from './nativeActivities';
import type { BatchSlotActivities } from './slotActivities';
import type { WebhookActivities, EventType } from '../webhooks';
import {
  CANCEL_SIGNAL,
  STAGE_QUERY,
  type BatchActivities,
  type BatchJobInput,
  type BatchJobResult,
  type BatchPosition,
  type BatchStatus,
  type BatchTiming,
  type ChunkOutcome,
  type FinalStatus,
} from './workflowContract';
import { dbStep, jobRetry } from '../jobActivityOptions';

/**
 * One batch (POST /v1/batches), from validating to a final status (docs/batches.md):
 *
 *   validating   startBatch      the input is there                          -> in_progress
 *   in_progress  runChunk × n    each chunk of lines runs and is committed   (charges, output parts)
 *   in_progress  markFinalizing  every line has run                          -> finalizing
 *   finalizing   finalizeBatch   output and error files; rest of the hold released -> completed
 *   expired      finalizeBatch   the window closed first: unrun lines listed as batch_expired, released
 *   cancelled    finalizeBatch   POST .../cancel: the chunk in flight finishes (charged), the rest released
 *   failed       finalizeBatch   the input could not be read, or a chunk kept failing: the rest released
 *
 * Each final status, once committed, is announced to the account's webhooks (batch.completed, batch.failed,
 * batch.expired, batch.cancelled). Deterministic: all I/O happens in activities (./activities.ts); where the
 * batch stands is in Postgres (its chunk rows), so another worker, or a continued run, resumes from there.
 * The contract (input, result, activities and their arguments) is src/jobs/batches/workflowContract.ts.
 */

/** Activity options: timeouts, retries, heartbeats, made per batch from the timing it started with. */
function activityOptions(t: BatchTiming) {
  const retry = jobRetry(t);
  return {
    /** Database steps (status, events) must eventually succeed: retried without limit. */
    db: dbStep(t),
    /** A chunk heartbeats (a dead worker's chunk is retried elsewhere); one that keeps failing fails the batch. */
    chunk: {
      startToCloseTimeout: t.chunkTimeoutMs,
      heartbeatTimeout: t.heartbeatMs,
      retry: { ...retry, maximumAttempts: 20 },
    },
    /** Finalizing and collecting stream parts into files, heartbeating; they must eventually succeed. */
    finalize: { startToCloseTimeout: t.chunkTimeoutMs, heartbeatTimeout: t.heartbeatMs, retry },
    /** Calls to a provider's batch API: retried like chunks (a refusal that cannot change is not retried). */
    native: { startToCloseTimeout: t.activityTimeoutMs, retry: { ...retry, maximumAttempts: 20 } },
    /**
     * Following a batch the provider runs for us (status, cancel, finding it): retried without limit at a bounded
     * interval, so no provider outage, however long, abandons it; a refusal that cannot change is not retried.
     */
    follow: { startToCloseTimeout: t.activityTimeoutMs, retry },
  };
}

/**
 * patched(): the native branch follows the provider's batch it created to its end whatever happens (a status
 * outage, a fault, a cancel before the submission answered), and then collects and bills what ran. Histories of
 * batches started before it replay the earlier branch.
 */
export const NATIVE_FOLLOWS_PATCH = 'batch-native-follows-upstream';

const messageOf = (e: unknown) => (e as Error).message;

/** POST /v1/batches/{id}/cancel. */
export const batchCancelSignal = defineSignal<[]>(CANCEL_SIGNAL);
/** The batch's status as this workflow sees it (temporal workflow query). */
export const batchStageQuery = defineQuery<BatchStatus>(STAGE_QUERY);

export async function batchJobWorkflow(input: BatchJobInput): Promise<BatchJobResult> {
  const t = input.timing;
  const o = activityOptions(t);
  const db = proxyActivities<BatchActivities>(o.db);
  const chunks = proxyActivities<BatchActivities>(o.chunk);
  const finishing = proxyActivities<BatchActivities & BatchNativeActivities>(o.finalize);
  const native = proxyActivities<BatchNativeActivities>(o.native);
  const follow = proxyActivities<BatchNativeActivities>(o.follow);
  const events = proxyActivities<WebhookActivities>(o.db);
  const slots = proxyActivities<BatchSlotActivities>(o.db);

  let status: BatchStatus = 'validating';
  let cancelRequested = false;
  setHandler(batchCancelSignal, () => {
    cancelRequested = true;
  });
  setHandler(batchStageQuery, () => status);
  const enter = (s: BatchStatus) => {
    status = s;
    if (input.statusSearchAttribute) upsertSearchAttributes({ [input.statusSearchAttribute]: [s] });
  };

  const { batchId, accountId } = input;
  // Fewer workflow tasks, each a turn of the worker beside other accounts' (docs/architecture.md, "Fairness").
  const fewer = patched('batch-fewer-turns');
  const opened = fewer ? await db.openBatch({ batchId }) : null;
  const s = opened ?? (await db.startBatch({ batchId }));
  if (s.final) return { status: null };
  let pos: BatchPosition = s;
  cancelRequested ||= s.cancelRequested;
  let end: FinalStatus = 'completed';
  let failure = s.failure;
  const target = opened ? opened.target : failure ? null : await native.nativeTarget({ batchId });
  if (failure) end = 'failed';
  else if (target && patched(NATIVE_FOLLOWS_PATCH)) {
    enter(cancelRequested ? 'cancelling' : 'in_progress');
    await followNative(target);
  } else if (target) {
    // The provider's own batch API runs it: submit, poll on a durable timer (a cancel wakes it), collect.
    enter(cancelRequested ? 'cancelling' : 'in_progress');
    let nativeId: string | null = null;
    let cancelSent = false;
    try {
      if (!cancelRequested) nativeId = (await native.submitNative({ batchId, ...target })).nativeId;
      while (nativeId) {
        if ((cancelRequested || Date.now() >= input.expiresAtMs) && !cancelSent) {
          if (cancelRequested) enter('cancelling');
          await native.cancelNative({ ...target, nativeId });
          cancelSent = true;
        }
        const st = await native.pollNative({ ...target, nativeId });
        if (st.ended) {
          end = st.end === 'failed' ? 'failed' : (st.end ?? 'completed');
          failure = st.failure ?? undefined;
          // A cancel we sent for the window's end reads as cancelled there: here it is the batch expiring.
          if (end === 'cancelled' && !cancelRequested) end = 'expired';
          break;
        }
        await condition(() => cancelRequested && !cancelSent, t.nativePollMs);
      }
      if (!nativeId) end = 'cancelled';
      const c = await finishing.collectNative({ batchId, ...target, nativeId });
      pos = { chunk: 0, offset: c.offset, line: c.line, done: true };
    } catch (e) {
      end = 'failed';
      failure = `The provider's batch API refused the batch: ${(e as Error).message}`.slice(0, 1000);
    }
  } else {
    enter(cancelRequested ? 'cancelling' : 'in_progress');
    // Each chunk takes one of its account's slots first (src/jobs/batches/slotActivities.ts); runs started before this
    // existed replay without it.
    const fair = patched('batch-account-slots');
    let slotWaits = 0;
    while (!pos.done) {
      if (cancelRequested) {
        end = 'cancelled';
        break;
      }
      if (Date.now() >= input.expiresAtMs) {
        end = 'expired';
        break;
      }
      // A long batch continues as a new run before its history grows large; the position is in Postgres.
      if (workflowInfo().continueAsNewSuggested) await continueAsNew<typeof batchJobWorkflow>(input);
      const at = { batchId, chunk: pos.chunk, offset: pos.offset, line: pos.line };
      let c: ChunkOutcome | null; // null: the account's chunks are at their cap
      try {
        if (fewer) c = await chunks.runChunkInSlot({ ...at, accountId });
        else if (fair && !(await slots.acquireBatchSlot({ batchId, accountId })).granted) c = null;
        else
          try {
            c = await chunks.runChunk(at);
          } finally {
            if (fair) await slots.releaseBatchSlot({ batchId, accountId });
          }
      } catch (e) {
        if (fewer) await slots.releaseBatchSlot({ batchId, accountId }); // failed for good: its slot given back
        end = 'failed';
        failure = `A part of the batch could not be run: ${(e as Error).message}`.slice(0, 1000);
        break;
      }
      if (!c) {
        // The account's chunks are at their cap: look again after a wait growing to 10 s (a cancel wakes it).
        await condition(() => cancelRequested, Math.min(10_000, 200 * 2 ** Math.min(slotWaits++, 6)));
        continue;
      }
      slotWaits = 0;
      cancelRequested ||= c.cancelRequested;
      pos = c;
      if (cancelRequested && !pos.done) enter('cancelling');
    }
    if (end === 'completed' && cancelRequested && !pos.done) end = 'cancelled';
  }
  if (end === 'completed' && !fewer) await db.markFinalizing({ batchId }); // else finalizeBatch marks it first
  if (end === 'completed') enter('finalizing');

  /** The native branch: submit (once), follow the provider's batch to its end, collect and bill what it ran. */
  async function followNative(target: NativeTarget): Promise<void> {
    const { providerId } = target;
    // Recorded on the row: a continued run (or a repaired one) resumes the batch its predecessor submitted.
    let nativeId = target.nativeId ?? null;
    let fault: string | undefined;
    if (!nativeId) {
      let refused: string | undefined;
      if (!cancelRequested)
        try {
          nativeId = (await native.submitNative({ batchId, providerId })).nativeId;
        } catch (e) {
          refused = `The provider's batch API refused the batch: ${messageOf(e)}`;
        }
      // A submission that failed, or a cancel that came first: a try may still have created the batch there.
      if (!nativeId) nativeId = (await follow.findNative({ batchId, providerId })).nativeId;
      if (!nativeId) fault = refused;
    }
    let cancelSent = false;
    while (nativeId) {
      // A long wait continues as a new run before its history grows large; the provider's batch is on the row.
      if (!fault && workflowInfo().continueAsNewSuggested) await continueAsNew<typeof batchJobWorkflow>(input);
      // Any end but the provider's own (a cancel, the window's end, a fault) is sent there first.
      if ((cancelRequested || fault !== undefined || Date.now() >= input.expiresAtMs) && !cancelSent) {
        if (cancelRequested) enter('cancelling');
        await follow.cancelNative({ providerId, nativeId });
        cancelSent = true;
      }
      let st;
      try {
        st = await follow.pollNative({ providerId, nativeId });
      } catch (e) {
        // Its status refused for good: cancel it there, then collect whatever it ran.
        fault ??= `The provider's batch API refused a status read: ${messageOf(e)}`.slice(0, 1000);
        if (cancelSent) break;
        continue;
      }
      if (st.ended) {
        end = st.end === 'failed' ? 'failed' : (st.end ?? 'completed');
        failure = st.failure ?? undefined;
        // A cancel we sent for the window's end reads as cancelled there: here it is the batch expiring.
        if (end === 'cancelled' && !cancelRequested) end = 'expired';
        break;
      }
      await condition(() => cancelRequested && !cancelSent, t.nativePollMs);
    }
    if (!nativeId && !fault) end = 'cancelled';
    if (nativeId || !fault)
      try {
        const c = await finishing.collectNative({ batchId, providerId, nativeId });
        pos = { chunk: 0, offset: c.offset, line: c.line, done: true };
      } catch (e) {
        fault ??= `The provider's batch results could not be collected: ${messageOf(e)}`.slice(0, 1000);
      }
    if (fault) {
      end = 'failed';
      failure = fault.slice(0, 1000);
    }
  }

  const r = await CancellationScope.nonCancellable(() =>
    finishing.finalizeBatch({ batchId, status: end, offset: pos.offset, line: pos.line, failure }),
  );
  if (r.status) {
    enter(r.status);
    const type = `batch.${r.status}` as EventType;
    await events.emitWebhookEvent({ accountId, type, data: { id: batchId }, key: `batch:${batchId}:${type}` });
  }
  return r;
}
