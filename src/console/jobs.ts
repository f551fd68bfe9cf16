import type { Db } from '../db';
import type { Redactor } from '../catalog';

/** Video jobs as the console shows them, read from the video_jobs projection (migration 010). */

export const JOB_STATUSES = ['submitted', 'processing', 'completed', 'failed', 'expired'] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];

export interface ConsoleJob {
  id: string;
  accountId: string;
  model: string;
  status: JobStatus;
  prompt: string;
  seconds: number;
  size: string | null;
  maxCostVnd: number;
  durationSeconds: number | null;
  costVnd: number | null;
  error: { message: string; code: string | null } | null;
  hasVideo: boolean;
  hasLastFrame: boolean;
  videoSize: number | null;
  workflowId: string;
  createdAt: string;
  updatedAt: string;
  completedAt: string | null;
}

const COLUMNS = `id, account_id, model, status, request->>'prompt' AS prompt, request->>'size' AS size, seconds,
  max_cost_vnd, result_duration_seconds, cost_vnd, error_message, error_code, video_key, video_size, last_frame_key,
  workflow_id, created_at, updated_at, completed_at`;

const iso = (d: Date | null) => (d ? d.toISOString() : null);

/** A stored job as shown; its error message without catalog internals (jobs failed before redaction existed too). */
function toJob(x: any, redact: Redactor): ConsoleJob {
  return {
    id: x.id,
    accountId: x.account_id,
    model: x.model,
    status: x.status,
    prompt: x.prompt ?? '',
    seconds: x.seconds,
    size: x.size ?? null,
    maxCostVnd: x.max_cost_vnd,
    durationSeconds: x.result_duration_seconds ?? null,
    costVnd: x.cost_vnd ?? null,
    error: x.error_message ? { message: redact(x.error_message), code: x.error_code ?? null } : null,
    hasVideo: x.status === 'completed' && !!x.video_key,
    hasLastFrame: x.status === 'completed' && !!x.last_frame_key,
    videoSize: x.video_size ?? null,
    workflowId: x.workflow_id,
    createdAt: x.created_at.toISOString(),
    updatedAt: x.updated_at.toISOString(),
    completedAt: iso(x.completed_at),
  };
}

export async function listJobs(
  db: Db,
  redact: Redactor,
  accountId: string,
  opts: { status?: JobStatus; limit: number },
): Promise<ConsoleJob[]> {
  const r = await db.query(
    `SELECT ${COLUMNS} FROM video_jobs WHERE account_id = $1 AND ($2::text IS NULL OR status = $2)
     ORDER BY created_at DESC, id DESC LIMIT $3`,
    [accountId, opts.status ?? null, opts.limit],
  );
  return r.rows.map((x) => toJob(x, redact));
}

export async function getJob(db: Db, redact: Redactor, accountId: string, id: string): Promise<ConsoleJob | null> {
  const r = await db.query(`SELECT ${COLUMNS} FROM video_jobs WHERE id = $1 AND account_id = $2`, [id, accountId]);
  return r.rowCount ? toJob(r.rows[0], redact) : null;
}

/** The stored media of a completed job of the account, or null. */
export async function jobMedia(db: Db, accountId: string, id: string, which: 'video' | 'last_frame') {
  const r = await db.query(
    `SELECT status, video_key, video_size, video_etag,
            last_frame_key, last_frame_size, last_frame_etag, last_frame_content_type
       FROM video_jobs WHERE id = $1 AND account_id = $2`,
    [id, accountId],
  );
  if (r.rowCount === 0) return null;
  const x = r.rows[0];
  if (x.status !== 'completed') return { status: x.status as JobStatus, key: null, contentType: '' };
  const key: string | null = which === 'video' ? x.video_key : x.last_frame_key;
  const contentType = which === 'video' ? 'video/mp4' : (x.last_frame_content_type ?? 'image/png');
  return { status: x.status as JobStatus, key, contentType };
}
