import { randomBytes } from 'node:crypto';
import type { Db, Queryable } from '../../db';
import { tx, PG_ERROR, pgErrorCode } from '../../db';
import {
  placeHoldIn,
  releaseHoldIn,
  writeUsageBatch,
  type SettledUsage,
  type UsageInput,
  recordGatewayCost,
} from '../../billing';
import type { Pricing } from '../../catalog';
import { eventIdOf, recordEventIn, type DeliveryRef, type EventType } from '../webhooks';
import { afterEndLineCost } from './lineCosts';

/**
 * The batch repository. The batches row is the projection clients read; the workflow (src/jobs/batches/workflow.ts)
 * moves it forward through its activities. Status only moves forward and a final status never changes, so a
 * retried activity is a no-op. Money: the hold is placed with the row (createBatchWithHold), each chunk's items
 * are charged with the chunk's row (commitChunk: usage records keyed by (batch, custom_id), so an item is charged
 * once whatever retries; usage above the hold collected as the synchronous path collects it), and the rest of the
 * hold is released with the final status (finishBatch).
 */

export const BATCH_STATUSES = [
  'validating',
  'in_progress',
  'finalizing',
  'completed',
  'failed',
  'expired',
  'cancelling',
  'cancelled',
] as const;
export type BatchStatus = (typeof BATCH_STATUSES)[number];
export type FinalStatus = 'completed' | 'failed' | 'expired' | 'cancelled';
export const FINAL_STATUSES: BatchStatus[] = ['completed', 'failed', 'expired', 'cancelled'];
export const isFinal = (s: BatchStatus) => FINAL_STATUSES.includes(s);
export const OPEN_SQL = `('validating', 'in_progress', 'finalizing', 'cancelling')`;

export interface BatchError {
  code: string;
  message: string;
  param: string | null;
  line: number | null;
}

export interface Batch {
  id: string;
  accountId: string;
  apiKeyId: string | null;
  endpoint: string;
  model: string;
  inputFileId: string;
  completionWindow: string;
  metadata: Record<string, string> | null;
  status: BatchStatus;
  total: number;
  completed: number;
  failed: number;
  maxCostVnd: number;
  costVnd: number;
  holdId: string;
  workflowId: string;
  workflowStartedAt: Date | null;
  outputFileId: string | null;
  errorFileId: string | null;
  errors: BatchError[] | null;
  expiresAt: Date;
  inProgressAt: Date | null;
  finalizingAt: Date | null;
  completedAt: Date | null;
  failedAt: Date | null;
  expiredAt: Date | null;
  cancellingAt: Date | null;
  cancelledAt: Date | null;
  createdAt: Date;
}

function toBatch(r: Record<string, any>): Batch {
  return {
    id: r.id,
    accountId: r.account_id,
    apiKeyId: r.api_key_id,
    endpoint: r.endpoint,
    model: r.model,
    inputFileId: r.input_file_id,
    completionWindow: r.completion_window,
    metadata: r.metadata,
    status: r.status,
    total: r.total,
    completed: r.completed,
    failed: r.failed,
    maxCostVnd: Number(r.max_cost_vnd),
    costVnd: Number(r.cost_vnd),
    holdId: r.hold_id,
    workflowId: r.workflow_id,
    workflowStartedAt: r.workflow_started_at,
    outputFileId: r.output_file_id,
    errorFileId: r.error_file_id,
    errors: r.errors,
    expiresAt: r.expires_at,
    inProgressAt: r.in_progress_at,
    finalizingAt: r.finalizing_at,
    completedAt: r.completed_at,
    failedAt: r.failed_at,
    expiredAt: r.expired_at,
    cancellingAt: r.cancelling_at,
    cancelledAt: r.cancelled_at,
    createdAt: r.created_at,
  };
}

export const newBatchId = () => `batch_${randomBytes(12).toString('hex')}`;
export const BATCH_ID = /^batch_[0-9a-f]{24}$/;
export const workflowIdOf = (batchId: string) => `batch-${batchId}`;
export const holdKeyOf = (batchId: string) => `batch:${batchId}:hold`;
export const releaseKeyOf = (batchId: string) => `batch:${batchId}:release`;
export const LEDGER_REF_TYPE = 'batch';

export interface NewBatch {
  id: string;
  accountId: string;
  apiKeyId: string | null;
  endpoint: string;
  model: string;
  inputFileId: string;
  completionWindow: string;
  metadata: Record<string, string> | null;
  total: number;
  maxCostVnd: number;
  holdId: string;
  expiresAt: Date;
}

/**
 * Inserts the batch and places its hold in ONE transaction: no batch without a hold, no hold without a batch.
 * Throws InsufficientFunds or BudgetExceeded with nothing written.
 */
export async function createBatchWithHold(db: Db, b: NewBatch): Promise<Batch> {
  return tx(db, async (c) => {
    const r = await c.query(
      `INSERT INTO batches (id, account_id, api_key_id, endpoint, model, input_file_id, completion_window, metadata,
         total, max_cost_vnd, hold_id, workflow_id, expires_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) RETURNING *`,
      [
        b.id,
        b.accountId,
        b.apiKeyId,
        b.endpoint,
        b.model,
        b.inputFileId,
        b.completionWindow,
        b.metadata === null ? null : JSON.stringify(b.metadata),
        b.total,
        b.maxCostVnd,
        b.holdId,
        workflowIdOf(b.id),
        b.expiresAt,
      ],
    );
    await placeHoldIn(c, {
      accountId: b.accountId,
      apiKeyId: b.apiKeyId,
      holdId: b.holdId,
      amount: b.maxCostVnd,
      idempotencyKey: holdKeyOf(b.id),
      refType: LEDGER_REF_TYPE,
      refId: b.id,
    });
    return toBatch(r.rows[0]);
  });
}

export async function getBatch(db: Queryable, id: string): Promise<Batch | null> {
  const r = await db.query('SELECT * FROM batches WHERE id = $1', [id]);
  return r.rowCount ? toBatch(r.rows[0]) : null;
}

export async function getBatchForAccount(db: Queryable, accountId: string, id: string): Promise<Batch | null> {
  if (!BATCH_ID.test(id)) return null;
  const r = await db.query('SELECT * FROM batches WHERE id = $1 AND account_id = $2 AND deleted_at IS NULL', [
    id,
    accountId,
  ]);
  return r.rowCount ? toBatch(r.rows[0]) : null;
}

/** Marks a batch deleted (a message batch, through the Anthropic API): no API shows it again; its row stays. */
export async function markBatchDeleted(db: Queryable, id: string): Promise<void> {
  await db.query('UPDATE batches SET deleted_at = now() WHERE id = $1 AND deleted_at IS NULL', [id]);
}

export async function listBatches(
  db: Queryable,
  accountId: string,
  o: { limit: number; after?: string; order: 'asc' | 'desc' },
): Promise<{ batches: Batch[]; hasMore: boolean }> {
  const cmp = o.order === 'desc' ? '<' : '>';
  const dir = o.order === 'desc' ? 'DESC' : 'ASC';
  const r = await db.query(
    `SELECT b.* FROM batches b WHERE b.account_id = $1 AND b.deleted_at IS NULL
       AND ($3::text IS NULL
            OR (b.created_at, b.id) ${cmp} (SELECT created_at, id FROM batches WHERE id = $3 AND account_id = $1))
     ORDER BY b.created_at ${dir}, b.id ${dir} LIMIT $2`,
    [accountId, o.limit + 1, o.after ?? null],
  );
  const rows = r.rows.map(toBatch);
  return { batches: rows.slice(0, o.limit), hasMore: rows.length > o.limit };
}

const STAMP: Partial<Record<BatchStatus, string>> = {
  in_progress: 'in_progress_at',
  finalizing: 'finalizing_at',
  completed: 'completed_at',
  failed: 'failed_at',
  expired: 'expired_at',
  cancelling: 'cancelling_at',
  cancelled: 'cancelled_at',
};

/** Moves an open batch from one of `from` to `to`; false (nothing changed) otherwise. */
export async function transition(db: Queryable, id: string, from: BatchStatus[], to: BatchStatus): Promise<boolean> {
  const r = await db.query(
    `UPDATE batches SET status = $2, ${STAMP[to]} = COALESCE(${STAMP[to]}, now()), updated_at = now()
     WHERE id = $1 AND status = ANY($3::text[]) RETURNING id`,
    [id, to, from],
  );
  return r.rowCount === 1;
}

/** POST /v1/batches/{id}/cancel: an open batch becomes `cancelling` (the workflow then ends it `cancelled`). */
export async function markCancelling(db: Queryable, id: string): Promise<boolean> {
  return transition(db, id, ['validating', 'in_progress'], 'cancelling');
}

export async function markWorkflowStarted(db: Queryable, id: string): Promise<void> {
  await db.query('UPDATE batches SET workflow_started_at = now() WHERE id = $1 AND workflow_started_at IS NULL', [id]);
}

export interface ChunkRow {
  chunk: number;
  firstLine: number;
  lines: number;
  nextOffset: number;
  completed: number;
  failed: number;
  costVnd: number;
  outputKey: string | null;
  errorKey: string | null;
}

const toChunk = (r: Record<string, any>): ChunkRow => ({
  chunk: r.chunk,
  firstLine: r.first_line,
  lines: r.lines,
  nextOffset: Number(r.next_offset),
  completed: r.completed,
  failed: r.failed,
  costVnd: Number(r.cost_vnd),
  outputKey: r.output_key,
  errorKey: r.error_key,
});

export async function getChunk(db: Queryable, batchId: string, chunk: number): Promise<ChunkRow | null> {
  const r = await db.query('SELECT * FROM batch_chunks WHERE batch_id = $1 AND chunk = $2', [batchId, chunk]);
  return r.rowCount ? toChunk(r.rows[0]) : null;
}

export async function listChunks(db: Queryable, batchId: string): Promise<ChunkRow[]> {
  const r = await db.query('SELECT * FROM batch_chunks WHERE batch_id = $1 ORDER BY chunk', [batchId]);
  return r.rows.map(toChunk);
}

/**
 * One item's settled usage, charged against the batch's hold: `cost` is its units at `usage.pricing` (null only for
 * an item billed nothing), so verify-ledger re-prices every batch usage record.
 */
export interface ItemUsage {
  usage: UsageInput & { pricing: Pricing | null };
  cost: number;
}

/**
 * Commits a chunk: its items' usage records and charges against the batch's hold, its row (output and error
 * parts), the batch's counts and cost, in ONE transaction. A chunk already committed (a retried or duplicated
 * activity) changes nothing and returns the committed row, whose parts are the ones that count.
 */
export async function commitChunk(
  db: Db,
  /** `attempt`: the chunk attempt committing it (named on the gateway costs of lines answered after the end). */
  b: { batchId: string; accountId: string; holdId: string; attempt?: string },
  row: ChunkRow,
  items: ItemUsage[],
): Promise<{ row: ChunkRow; committed: boolean }> {
  try {
    return await tx(db, async (c) => {
      const lock = await c.query('SELECT status FROM batches WHERE id = $1 FOR UPDATE', [b.batchId]);
      if (lock.rowCount === 0) throw new Error(`batch ${b.batchId} not found`);
      const had = await getChunk(c, b.batchId, row.chunk);
      if (had) return { row: had, committed: false };
      // The batch ended while this attempt ran (a reconciler ended it after its workflow closed): a superseded
      // attempt commits nothing; its hold is closed and its files are written. What the provider billed for the
      // lines it answered is the gateway's own cost (those the end charged already excepted).
      if (isFinal(lock.rows[0].status)) {
        await recordAfterEnd(c, b, items);
        return { row: { ...row, costVnd: 0 }, committed: false };
      }
      // The bill is the provider's bill, as on the synchronous path: what the hold still covers is charged from it,
      // the rest (`excess`: usage above the bound) is collected from the account's free funds and its key's budget
      // room, and what neither covers is recorded as the item's shortfall (writeUsageBatch).
      const h = await c.query('SELECT remaining, status FROM holds WHERE id = $1', [b.holdId]);
      let room = h.rows[0]?.status === 'open' ? Number(h.rows[0].remaining) : 0;
      const settled: SettledUsage[] = items.map((i) => {
        const cost = Math.min(i.cost, room);
        room -= cost;
        return { usage: i.usage, accountId: b.accountId, holdId: b.holdId, cost, excess: i.cost - cost };
      });
      const charged = await writeUsageBatch(c, settled);
      await c.query(
        `INSERT INTO batch_chunks (batch_id, chunk, first_line, lines, next_offset, completed, failed, cost_vnd,
           output_key, error_key) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
        [
          b.batchId,
          row.chunk,
          row.firstLine,
          row.lines,
          row.nextOffset,
          row.completed,
          row.failed,
          charged,
          row.outputKey,
          row.errorKey,
        ],
      );
      await c.query(
        `UPDATE batches SET completed = completed + $2, failed = failed + $3, cost_vnd = cost_vnd + $4,
           updated_at = now() WHERE id = $1`,
        [b.batchId, row.completed, row.failed, charged],
      );
      return { row: { ...row, costVnd: charged }, committed: true };
    });
  } catch (e) {
    // A twin attempt committed the same chunk first.
    if (pgErrorCode(e) === PG_ERROR.uniqueViolation) {
      const had = await getChunk(db, b.batchId, row.chunk);
      if (had) return { row: had, committed: false };
    }
    throw e;
  }
}

/** What the provider billed for `items` answered after their batch ended (those its end charged excepted). */
async function recordAfterEnd(
  c: Queryable,
  b: { batchId: string; accountId: string; attempt?: string },
  items: ItemUsage[],
): Promise<void> {
  const billed = items.filter((i) => i.usage.pricing !== null);
  if (!billed.length) return;
  const charged = await c.query('SELECT id FROM usage_records WHERE id = ANY($1::uuid[])', [
    billed.map((i) => i.usage.id),
  ]);
  const had = new Set(charged.rows.map((x) => x.id as string));
  for (const i of billed)
    if (!had.has(i.usage.id)) await recordGatewayCost(c, afterEndLineCost(b, i, b.attempt ?? null));
}

/**
 * A chunk attempt stopped before committing (its workflow closed, or it was superseded) with `items` answered: if
 * the batch has ended meanwhile, nothing will charge them (its end charged the lines answered before it), so what
 * the provider billed is recorded as the gateway's own cost; a batch still open leaves them to whoever commits the
 * chunk or ends the batch (true: the batch had ended).
 */
export async function recordAnsweredAfterEnd(
  db: Db,
  b: { batchId: string; accountId: string; attempt?: string },
  items: ItemUsage[],
): Promise<boolean> {
  if (!items.length) return false;
  return tx(db, async (c) => {
    const lock = await c.query('SELECT status FROM batches WHERE id = $1 FOR UPDATE', [b.batchId]);
    if (!lock.rowCount || !isFinal(lock.rows[0].status)) return false;
    await recordAfterEnd(c, b, items);
    return true;
  });
}

/** The key of a batch's final event (batch.completed, ...): the workflow's emission and finishBatch name it alike. */
export const finalEventKeyOf = (batchId: string, status: FinalStatus) => `batch:${batchId}:batch.${status}`;

export interface FinishOutcome {
  /** The batch's final status: the one this call committed, or the one stored before it (a retry, a twin). */
  status: FinalStatus;
  /** This call made the transition. */
  committed: boolean;
  /** The final event's deliveries still pending, to be started (startDelivery; a started one is not started twice). */
  deliveries: DeliveryRef[];
}

/**
 * Ends a batch: releases what is left of its hold, moves it to its final status with its files and errors, and
 * records its final event (batch.<status>, with its deliveries), in ONE transaction: the event exists exactly when
 * the transition does, once. A batch already final changes nothing and answers its stored outcome, so a step
 * retried after its commit (or a reconciler racing the workflow) reads what was committed.
 */
export async function finishBatch(
  db: Db,
  f: {
    batchId: string;
    holdId: string;
    status: FinalStatus;
    outputFileId: string | null;
    errorFileId: string | null;
    errors?: BatchError[] | null;
    /** Items never run (expired, cancelled, failed) counted as failed, as OpenAI counts them. */
    unfinished?: number;
  },
): Promise<FinishOutcome> {
  return tx(db, async (c) => {
    const r = await c.query('SELECT status, account_id FROM batches WHERE id = $1 FOR UPDATE', [f.batchId]);
    if (r.rowCount === 0) throw new Error(`batch ${f.batchId} not found`);
    const accountId: string = r.rows[0].account_id;
    const event = (status: FinalStatus) => ({
      accountId,
      type: `batch.${status}` as EventType,
      data: { id: f.batchId },
      key: finalEventKeyOf(f.batchId, status),
    });
    if (isFinal(r.rows[0].status)) {
      const status = r.rows[0].status as FinalStatus;
      const pending = await c.query(
        `SELECT d.id, d.generation FROM webhook_deliveries d
         WHERE d.event_id = $1 AND d.status = 'pending' ORDER BY d.id`,
        [eventIdOf(event(status).key)],
      );
      return {
        status,
        committed: false,
        deliveries: pending.rows.map((x) => ({ deliveryId: x.id, generation: x.generation })),
      };
    }
    await releaseHoldIn(c, { holdId: f.holdId, idempotencyKey: releaseKeyOf(f.batchId), memo: `batch ${f.status}` });
    const stamp = STAMP[f.status]!;
    await c.query(
      `UPDATE batches SET status = $2, ${stamp} = COALESCE(${stamp}, now()), output_file_id = $3, error_file_id = $4,
         errors = COALESCE($5::jsonb, errors), failed = failed + $6, updated_at = now(),
         finalizing_at = CASE WHEN $2 = 'completed' THEN COALESCE(finalizing_at, now()) ELSE finalizing_at END
       WHERE id = $1`,
      [
        f.batchId,
        f.status,
        f.outputFileId,
        f.errorFileId,
        f.errors ? JSON.stringify(f.errors) : null,
        f.unfinished ?? 0,
      ],
    );
    const { deliveries } = await recordEventIn(c, event(f.status));
    return { status: f.status, committed: true, deliveries };
  });
}
