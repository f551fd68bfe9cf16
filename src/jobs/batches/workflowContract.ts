import type { BatchStatus, FinalStatus } from './repo';
import type { NativeTarget } from './target';

/**
 * The batch workflow's contract, in one place: how it is started (its type, input and result), how it is spoken
 * to (signal, query), and every activity it calls with its arguments and what it answers. The API starts it
 * (./start.ts), ./workflow.ts runs it, ./activities.ts implements the activities. Types only, so the
 * workflow bundle imports nothing that does I/O.
 *
 * Everything named here is recorded in the histories of batches in flight: keep the registered names, add fields
 * as optional, change the order of steps only behind `patched()`.
 */

export type { BatchStatus, FinalStatus };

/** The registered workflow type (the API starts it by this name; operators filter the Temporal UI by it). */
export const BATCH_WORKFLOW_TYPE = 'batchJobWorkflow';
/** POST /v1/batches/{id}/cancel. */
export const CANCEL_SIGNAL = 'cancel';
/** The batch's status as the workflow sees it (temporal workflow query). */
export const STAGE_QUERY = 'stage';

/** The part of the batch settings (./settings.ts) a batch keeps from its start. */
export interface BatchTiming {
  /** First retry interval of every activity (ms), doubling up to activityRetryMaxMs. */
  activityRetryInitialMs: number;
  activityRetryMaxMs: number;
  /** Per-attempt limit of a chunk and of finalizing (ms); both heartbeat. */
  chunkTimeoutMs: number;
  /** A chunk or a finalize that has not heartbeaten for this long is retried elsewhere (a dead worker). */
  heartbeatMs: number;
  /** Per-attempt limit of the database steps and of calls to a provider's batch API (ms). */
  activityTimeoutMs: number;
  /** Between two status reads of a batch running on its provider's own batch API (ms). */
  nativePollMs: number;
}

/** The workflow's input, fixed when the batch starts. */
export interface BatchJobInput {
  batchId: string;
  accountId: string;
  /** When the completion window closes (epoch ms): unfinished items then expire. */
  expiresAtMs: number;
  timing: BatchTiming;
  /** The status search attribute (`GatewayJobStatus`), or null when the namespace lacks the gateway's attributes. */
  statusSearchAttribute: string | null;
}

/** The final status the workflow committed (null: the batch was final before this run). */
export interface BatchJobResult {
  status: FinalStatus | null;
}

// ---- Activity arguments and results ----

export interface BatchArgs {
  batchId: string;
}

/** Where the batch stands in its input: the next chunk and the position after the committed ones. */
export interface BatchPosition {
  chunk: number;
  /** Byte offset of the next line to run. */
  offset: number;
  /** Lines (1-based numbers) before `offset`. */
  line: number;
  /** Every line has run. */
  done: boolean;
}

export interface StartOutcome extends BatchPosition {
  /** The batch was final before this run: nothing to do. */
  final: boolean;
  cancelRequested: boolean;
  /** The input cannot be read: the batch fails with this message. */
  failure?: string;
}

export interface ChunkArgs extends BatchArgs {
  chunk: number;
  offset: number;
  line: number;
}

export interface ChunkOutcome extends BatchPosition {
  completed: number;
  failed: number;
  cancelRequested: boolean;
}

export interface FinalizeArgs extends BatchArgs {
  status: FinalStatus;
  /** Where the unrun lines start (an expired batch lists them as batch_expired). */
  offset: number;
  line: number;
  failure?: string;
}

/** The batch activities under their registered names (src/jobs/batches/activities.ts; registered by src/worker.ts). */
export interface BatchActivities {
  /** validating -> in_progress; where to resume. */
  startBatch(a: BatchArgs): Promise<StartOutcome>;
  /** startBatch, then nativeTarget (null for a batch final or failed already): one step. */
  openBatch(a: BatchArgs): Promise<StartOutcome & { target: NativeTarget | null }>;
  /** Runs and commits the next chunk of lines (charges, output and error parts), heartbeating. */
  runChunk(a: ChunkArgs): Promise<ChunkOutcome>;
  /** acquireBatchSlot, runChunk and releaseBatchSlot: one step; null when no slot was free (nothing ran). */
  runChunkInSlot(a: ChunkArgs & { accountId: string }): Promise<ChunkOutcome | null>;
  /** in_progress -> finalizing. */
  markFinalizing(a: BatchArgs): Promise<void>;
  /** The output and error files, then the final status with the release of the rest of the hold: one commit. */
  finalizeBatch(a: FinalizeArgs): Promise<BatchJobResult>;
}
