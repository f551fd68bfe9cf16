import type { Db, DbClient, Queryable } from '../db/pool';
import { tx } from '../db/pool';
import { lockHolds, placeHoldIn, recordUncollected, settleHoldIn } from '../billing/ledger';
import { collectAboveHold } from '../billing/overHold';
import type { VideoRequest } from './params';
import type { PriceSet } from '../catalog/catalog';
import { PG_ERROR, pgErrorCode } from '../db/pgErrors';
import type { VideoBilled } from '../billing/videoPricing';

export type { VideoBilled };

/**
 * The video job repository. The video_jobs row is a projection; every change to it appends a video_job_events
 * row in the same transaction. Status only moves forward (submitted -> processing -> completed | failed |
 * expired), and a final status never changes, so a retried activity is a no-op.
 */

export type JobStatus = 'submitted' | 'processing' | 'completed' | 'failed' | 'expired';
export const JOB_STATUSES: JobStatus[] = ['submitted', 'processing', 'completed', 'failed', 'expired'];
export const FINAL_STATUSES: JobStatus[] = ['completed', 'failed', 'expired'];
export const isFinal = (s: JobStatus) => FINAL_STATUSES.includes(s);

/** An input image kept in our storage until the provider has it. */
export interface StoredImageRef {
  key: string;
  mimeType: string;
  size: number;
}

/** The normalised request stored with the job (what the workflow's activities send to the provider). */
export type StoredVideoRequest = VideoRequest<StoredImageRef>;

export interface VideoJob {
  id: string;
  accountId: string;
  apiKeyId: string | null;
  model: string;
  provider: string;
  status: JobStatus;
  request: StoredVideoRequest;
  requestHash: string;
  idempotencyKey: string | null;
  seconds: number;
  /** The hold's price per second (the highest of what was asked). */
  pricePerSecond: number;
  maxCostVnd: number;
  /** The prices (and their version) the job is billed at; null for jobs of older builds (perVideoSecond then). */
  pricing: PriceSet | null;
  /** Once completed: what the charge was computed on. */
  billed: VideoBilled | null;
  holdId: string;
  workflowId: string;
  workflowStartedAt: Date | null;
  providerTaskId: string | null;
  /** The deployment that accepted the provider task; null before, and for jobs submitted before deployments. */
  deployment: string | null;
  resultDurationSeconds: number | null;
  costVnd: number | null;
  errorMessage: string | null;
  errorCode: string | null;
  videoKey: string | null;
  videoSize: number | null;
  videoEtag: string | null;
  lastFrameKey: string | null;
  lastFrameSize: number | null;
  lastFrameEtag: string | null;
  lastFrameContentType: string | null;
  cancelRequestedAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
  completedAt: Date | null;
}

function toJob(r: Record<string, any>): VideoJob {
  return {
    id: r.id,
    accountId: r.account_id,
    apiKeyId: r.api_key_id,
    model: r.model,
    provider: r.provider,
    status: r.status,
    request: r.request,
    requestHash: r.request_hash,
    idempotencyKey: r.idempotency_key,
    seconds: r.seconds,
    pricePerSecond: r.price_per_second,
    maxCostVnd: r.max_cost_vnd,
    pricing: r.pricing ?? null,
    billed: r.billed ?? null,
    holdId: r.hold_id,
    workflowId: r.workflow_id,
    workflowStartedAt: r.workflow_started_at,
    providerTaskId: r.provider_task_id,
    deployment: r.deployment ?? null,
    resultDurationSeconds: r.result_duration_seconds,
    costVnd: r.cost_vnd,
    errorMessage: r.error_message,
    errorCode: r.error_code,
    videoKey: r.video_key,
    videoSize: r.video_size,
    videoEtag: r.video_etag,
    lastFrameKey: r.last_frame_key,
    lastFrameSize: r.last_frame_size,
    lastFrameEtag: r.last_frame_etag,
    lastFrameContentType: r.last_frame_content_type,
    cancelRequestedAt: r.cancel_requested_at,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    completedAt: r.completed_at,
  };
}

export const workflowIdOf = (jobId: string) => `video-${jobId}`;
/** Ledger idempotency keys, derived from the job id so every retry of a step reuses the same key. */
export const holdKeyOf = (jobId: string) => `video-job:${jobId}:hold`;
export const settleKeyOf = (jobId: string) => `video-job:${jobId}:settle`;
export const LEDGER_REF_TYPE = 'video_job';

export async function appendEvent(
  c: Queryable,
  jobId: string,
  kind: string,
  status: JobStatus | null,
  data: Record<string, unknown> = {},
  key = `${jobId}:${kind}`,
): Promise<boolean> {
  const r = await c.query(
    `INSERT INTO video_job_events (job_id, kind, status, data, idempotency_key) VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (idempotency_key) DO NOTHING`,
    [jobId, kind, status, JSON.stringify(data), key],
  );
  return r.rowCount === 1;
}

export interface NewJob {
  id: string;
  accountId: string;
  apiKeyId: string | null;
  model: string;
  provider: string;
  request: StoredVideoRequest;
  requestHash: string;
  idempotencyKey: string | null;
  seconds: number;
  pricePerSecond: number;
  maxCostVnd: number;
  /** Absent: the job is charged at pricePerSecond (as jobs of older builds). */
  pricing?: PriceSet;
  holdId: string;
}

export class DuplicateIdempotencyKey extends Error {
  constructor(readonly existing: VideoJob) {
    super('idempotency key already used');
  }
}

/**
 * Inserts the job and places its hold in ONE transaction: there is never a job without a hold or a hold without
 * a job. Throws InsufficientFunds (nothing written) or DuplicateIdempotencyKey (a concurrent twin won).
 */
export async function createJobWithHold(db: Db, j: NewJob): Promise<VideoJob> {
  try {
    return await tx(db, async (c) => {
      const r = await c.query(
        `INSERT INTO video_jobs (id, account_id, api_key_id, model, provider, request, request_hash, idempotency_key,
           seconds, price_per_second, max_cost_vnd, hold_id, workflow_id, pricing)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) RETURNING *`,
        [
          j.id,
          j.accountId,
          j.apiKeyId,
          j.model,
          j.provider,
          JSON.stringify(j.request),
          j.requestHash,
          j.idempotencyKey,
          j.seconds,
          j.pricePerSecond,
          j.maxCostVnd,
          j.holdId,
          workflowIdOf(j.id),
          j.pricing ? JSON.stringify(j.pricing) : null,
        ],
      );
      // The hold names the key: it counts against the key's budget (refused past it: BudgetExceeded, nothing written).
      await placeHoldIn(c, {
        accountId: j.accountId,
        apiKeyId: j.apiKeyId,
        holdId: j.holdId,
        amount: j.maxCostVnd,
        idempotencyKey: holdKeyOf(j.id),
        refType: LEDGER_REF_TYPE,
        refId: j.id,
      });
      await appendEvent(c, j.id, 'submitted', 'submitted', {
        model: j.model,
        seconds: j.seconds,
        maxCostVnd: j.maxCostVnd,
        holdId: j.holdId,
      });
      return toJob(r.rows[0]);
    });
  } catch (e) {
    if (
      pgErrorCode(e) === PG_ERROR.uniqueViolation &&
      (e as { constraint?: string }).constraint === 'video_jobs_idempotency' &&
      j.idempotencyKey
    ) {
      const existing = await findByIdempotencyKey(db, j.accountId, j.idempotencyKey);
      if (existing) throw new DuplicateIdempotencyKey(existing);
    }
    throw e;
  }
}

export async function findByIdempotencyKey(db: Queryable, accountId: string, key: string): Promise<VideoJob | null> {
  const r = await db.query('SELECT * FROM video_jobs WHERE account_id = $1 AND idempotency_key = $2', [accountId, key]);
  return r.rowCount ? toJob(r.rows[0]) : null;
}

/** The job, only if it belongs to `accountId` (another account's job does not exist for the caller). */
export async function getJobForAccount(db: Queryable, accountId: string, id: string): Promise<VideoJob | null> {
  const r = await db.query('SELECT * FROM video_jobs WHERE id = $1 AND account_id = $2', [id, accountId]);
  return r.rowCount ? toJob(r.rows[0]) : null;
}

export async function getJob(db: Queryable, id: string): Promise<VideoJob | null> {
  const r = await db.query('SELECT * FROM video_jobs WHERE id = $1', [id]);
  return r.rowCount ? toJob(r.rows[0]) : null;
}

export interface ListOptions {
  status?: JobStatus;
  limit: number;
  after?: string;
  order: 'asc' | 'desc';
}

/** The account's jobs, newest first by default; `after` is the id of the last job of the previous page. */
export async function listJobs(
  db: Queryable,
  accountId: string,
  o: ListOptions,
): Promise<{ jobs: VideoJob[]; hasMore: boolean }> {
  const cmp = o.order === 'desc' ? '<' : '>';
  const dir = o.order === 'desc' ? 'DESC' : 'ASC';
  const r = await db.query(
    `SELECT j.* FROM video_jobs j
     WHERE j.account_id = $1 AND ($2::text IS NULL OR j.status = $2)
       AND ($4::uuid IS NULL
            OR (j.created_at, j.id) ${cmp} (SELECT created_at, id FROM video_jobs WHERE id = $4 AND account_id = $1))
     ORDER BY j.created_at ${dir}, j.id ${dir} LIMIT $3`,
    [accountId, o.status ?? null, o.limit + 1, o.after ?? null],
  );
  const rows = r.rows.map(toJob);
  return { jobs: rows.slice(0, o.limit), hasMore: rows.length > o.limit };
}

/** Columns a transition may set besides status. */
export interface JobPatch {
  providerTaskId?: string;
  /** The deployment that accepted the provider task (set with providerTaskId). */
  deployment?: string;
  resultDurationSeconds?: number;
  costVnd?: number;
  shortfallVnd?: number;
  billed?: VideoBilled;
  errorMessage?: string;
  errorCode?: string | null;
  videoKey?: string;
  videoSize?: number;
  videoEtag?: string;
  lastFrameKey?: string;
  lastFrameSize?: number;
  lastFrameEtag?: string;
  lastFrameContentType?: string;
  completed?: boolean;
}

const PATCH_COLUMNS: Record<Exclude<keyof JobPatch, 'completed'>, string> = {
  providerTaskId: 'provider_task_id',
  deployment: 'deployment',
  resultDurationSeconds: 'result_duration_seconds',
  costVnd: 'cost_vnd',
  shortfallVnd: 'shortfall_vnd',
  billed: 'billed',
  errorMessage: 'error_message',
  errorCode: 'error_code',
  videoKey: 'video_key',
  videoSize: 'video_size',
  videoEtag: 'video_etag',
  lastFrameKey: 'last_frame_key',
  lastFrameSize: 'last_frame_size',
  lastFrameEtag: 'last_frame_etag',
  lastFrameContentType: 'last_frame_content_type',
};

function patchSql(p: JobPatch, firstParam: number): { sets: string[]; values: unknown[] } {
  const sets: string[] = [];
  const values: unknown[] = [];
  for (const [k, col] of Object.entries(PATCH_COLUMNS) as [keyof typeof PATCH_COLUMNS, string][]) {
    if (p[k] === undefined) continue;
    values.push(k === 'billed' ? JSON.stringify(p[k]) : p[k]);
    sets.push(`${col} = $${firstParam + values.length - 1}`);
  }
  if (p.completed) sets.push('completed_at = now()');
  return { sets, values };
}

/**
 * Moves a job that is not final to `to` (or, with to = null, only updates columns of a job that is not final)
 * and appends the event, atomically. Returns false (and changes nothing) when the job is already final or
 * already in `to`, which is what makes a retried activity harmless.
 */
export async function transition(
  db: Db,
  jobId: string,
  to: JobStatus | null,
  patch: JobPatch,
  event: { kind: string; data?: Record<string, unknown> },
): Promise<boolean> {
  return tx(db, (c) => transitionIn(c, jobId, to, patch, event));
}

async function transitionIn(
  c: DbClient,
  jobId: string,
  to: JobStatus | null,
  patch: JobPatch,
  event: { kind: string; data?: Record<string, unknown> },
): Promise<boolean> {
  const { sets, values } = patchSql(patch, 3);
  if (to) sets.push('status = $2');
  sets.push('updated_at = now()');
  const r = await c.query(
    `UPDATE video_jobs SET ${sets.join(', ')}
     WHERE id = $1 AND status IN ('submitted', 'processing') AND ($2::text IS NULL OR status <> $2) RETURNING id`,
    [jobId, to, ...values],
  );
  if (r.rowCount === 0) return false;
  await appendEvent(c, jobId, event.kind, to, event.data ?? {});
  return true;
}

/**
 * Records the provider task that accepted the job, whatever the job's status: a task created while the job was
 * being ended (a cancel) must still be known, to be cancelled or followed. The status never changes here. Returns
 * the recorded task id (an earlier one wins over `taskId`), the job's status and whether a cancel was asked.
 */
export async function recordProviderTask(
  db: Db,
  jobId: string,
  taskId: string,
  deployment: string | null,
  data: Record<string, unknown>,
): Promise<{ taskId: string; status: JobStatus; cancelRequested: boolean }> {
  return tx(db, async (c) => {
    const r = await c.query(
      `UPDATE video_jobs SET provider_task_id = $2, deployment = COALESCE($3, deployment), updated_at = now()
       WHERE id = $1 AND provider_task_id IS NULL RETURNING provider_task_id, status, cancel_requested_at`,
      [jobId, taskId, deployment],
    );
    if (r.rowCount) await appendEvent(c, jobId, 'provider_submitted', null, data);
    const row = r.rowCount
      ? r.rows[0]
      : (await c.query('SELECT provider_task_id, status, cancel_requested_at FROM video_jobs WHERE id = $1', [jobId]))
          .rows[0];
    return { taskId: row.provider_task_id, status: row.status, cancelRequested: row.cancel_requested_at !== null };
  });
}

/** The workflow for this job exists (started by the API or by the reconciler). */
export async function markWorkflowStarted(db: Db, jobId: string, by: 'api' | 'reconciler'): Promise<void> {
  await tx(db, async (c) => {
    const r = await c.query(
      'UPDATE video_jobs SET workflow_started_at = now() WHERE id = $1 AND workflow_started_at IS NULL RETURNING id',
      [jobId],
    );
    if (r.rowCount) await appendEvent(c, jobId, 'workflow_started', null, { by });
  });
}

export async function markCancelRequested(db: Db, jobId: string): Promise<void> {
  await tx(db, async (c) => {
    const r = await c.query(
      `UPDATE video_jobs SET cancel_requested_at = now(), updated_at = now()
       WHERE id = $1 AND cancel_requested_at IS NULL AND status IN ('submitted', 'processing') RETURNING id`,
      [jobId],
    );
    if (r.rowCount) await appendEvent(c, jobId, 'cancel_requested', null, {});
  });
}

/**
 * How a job ends: completed with its charge (and its whole bill, `billVnd`, when the provider's duration costs more
 * than the hold covers), or failed or expired with the reason (nothing charged).
 */
export type JobEnd =
  | { status: 'completed'; chargeVnd: number; durationSeconds: number; billVnd?: number; billed?: VideoBilled }
  | { status: 'failed' | 'expired'; message: string; code?: string | null };

/**
 * Ends a job that is not final: settles its hold (charges the completed job's cost, releases the rest; idempotent
 * by the job's settle key) and moves it to its final status, in ONE transaction, so no reader ever sees the money
 * moved and the job still open, or the reverse. The job row is locked first; a job already final changes nothing
 * (false).
 */
export async function endJob(
  db: Db,
  j: { jobId: string; holdId: string; apiKeyId?: string | null },
  end: JobEnd,
): Promise<boolean> {
  const { jobId } = j;
  return tx(db, async (c) => {
    const r = await c.query('SELECT status, account_id FROM video_jobs WHERE id = $1 FOR UPDATE', [jobId]);
    if (r.rowCount === 0 || isFinal(r.rows[0].status)) return false;
    let charge = end.status === 'completed' ? end.chargeVnd : 0;
    let shortfall = 0;
    const bill = end.status === 'completed' ? Math.max(end.billVnd ?? 0, charge) : 0;
    if (bill > charge) {
      // Above the hold: collected from free funds as a synchronous request's bill is, the rest a shortfall.
      const holds = await lockHolds(c, [j.holdId]);
      const memo = `video job ${jobId}: duration above the hold`;
      const key = `${settleKeyOf(jobId)}:over`;
      ({ charge, shortfall } = await collectAboveHold(c, holds, {
        holdId: j.holdId,
        bill,
        apiKeyId: j.apiKeyId ?? null,
        idempotencyKey: key,
        memo,
      }));
    }
    const [memo, patch, data]: [string, JobPatch, Record<string, unknown>] =
      end.status === 'completed'
        ? [
            `video job ${jobId}: ${end.durationSeconds} s`,
            {
              resultDurationSeconds: end.durationSeconds,
              costVnd: charge,
              ...(shortfall ? { shortfallVnd: shortfall } : {}),
              completed: true,
              billed: end.billed,
            },
            {
              durationSeconds: end.durationSeconds,
              costVnd: charge,
              ...(shortfall ? { shortfallVnd: shortfall } : {}),
              ...(end.billed ? { billed: end.billed } : {}),
            },
          ]
        : [
            `video job ${jobId} ${end.status}`,
            { errorMessage: end.message, errorCode: end.code ?? null },
            { message: end.message, code: end.code ?? null },
          ];
    await settleHoldIn(c, {
      holdId: j.holdId,
      charge,
      idempotencyKey: settleKeyOf(jobId),
      refType: LEDGER_REF_TYPE,
      refId: jobId,
      memo,
    });
    if (shortfall > 0)
      await recordUncollected(c, [
        {
          accountId: r.rows[0].account_id,
          requestId: jobId,
          amount: shortfall,
          memo: `video job ${jobId}: ${bill} VND billed, ${shortfall} uncollected`,
          refType: LEDGER_REF_TYPE,
        },
      ]);
    return transitionIn(c, jobId, end.status, patch, { kind: end.status, data });
  });
}

export async function listEvents(
  db: Queryable,
  jobId: string,
): Promise<{ kind: string; status: JobStatus | null; data: Record<string, unknown>; createdAt: Date }[]> {
  const r = await db.query(
    'SELECT kind, status, data, created_at FROM video_job_events WHERE job_id = $1 ORDER BY id',
    [jobId],
  );
  return r.rows.map((x) => ({ kind: x.kind, status: x.status, data: x.data, createdAt: x.created_at }));
}
