import type Router from '@koa/router';
import type { AppDeps } from '../operations';
import { route, type GatewayState } from '../api/middleware';
import { badRequest, notFound } from '../errors';
import type { Db } from '../db';
import { requireCsrf, requireSession, sameOrigin, sessionOf } from './auth';
import { intParam } from './params';
import { BATCH_STATUSES, getBatchForAccount, type BatchStatus } from '../batches/repo';
import { cancelBatch } from '../batches/service';

/**
 * The signed-in account's batches (POST /v1/batches and /v1/messages/batches), read from the batches projection:
 * status, request counts, the cost charged so far and the hold still covering the rest, its input, output and
 * error files (downloaded through the session, as the /v1 file routes need an API key), and cancel.
 */

export interface ConsoleBatch {
  id: string;
  status: BatchStatus;
  endpoint: string;
  model: string;
  total: number;
  completed: number;
  failed: number;
  costVnd: number;
  maxCostVnd: number;
  files: { input: boolean; output: boolean; error: boolean };
  error: string | null;
  createdAt: string;
  endedAt: string | null;
  expiresAt: string;
}

const FILE_COLUMN = { input: 'input_file_id', output: 'output_file_id', error: 'error_file_id' } as const;
type Which = keyof typeof FILE_COLUMN;

function toView(x: any): ConsoleBatch {
  const ended = x.completed_at ?? x.failed_at ?? x.expired_at ?? x.cancelled_at ?? null;
  return {
    id: x.id,
    status: x.status,
    endpoint: x.endpoint,
    model: x.model,
    total: x.total,
    completed: x.completed,
    failed: x.failed,
    costVnd: Number(x.cost_vnd),
    maxCostVnd: Number(x.max_cost_vnd),
    files: { input: !!x.input_file_id, output: !!x.output_file_id, error: !!x.error_file_id },
    error: Array.isArray(x.errors) && x.errors.length ? String(x.errors[0].message ?? '') : null,
    createdAt: x.created_at.toISOString(),
    endedAt: ended ? ended.toISOString() : null,
    expiresAt: x.expires_at.toISOString(),
  };
}

export async function listConsoleBatches(
  db: Db,
  accountId: string,
  o: { status?: BatchStatus; limit: number },
): Promise<ConsoleBatch[]> {
  const r = await db.query(
    `SELECT * FROM batches WHERE account_id = $1 AND deleted_at IS NULL AND ($2::text IS NULL OR status = $2)
     ORDER BY created_at DESC, id DESC LIMIT $3`,
    [accountId, o.status ?? null, o.limit],
  );
  return r.rows.map(toView);
}

/** The storage key of one of a batch's files, if the batch is the account's and the file is there. */
async function batchFile(db: Db, accountId: string, id: string, which: Which) {
  const r = await db.query(
    `SELECT f.storage_key, f.filename, f.bytes FROM batches b JOIN files f ON f.id = b.${FILE_COLUMN[which]}
     WHERE b.id = $1 AND b.account_id = $2 AND f.deleted_at IS NULL`,
    [id, accountId],
  );
  return r.rowCount ? (r.rows[0] as { storage_key: string; filename: string; bytes: string }) : null;
}

function statusParam(v: unknown): BatchStatus | undefined {
  if (v === undefined || v === '') return undefined;
  if (typeof v !== 'string' || !(BATCH_STATUSES as readonly string[]).includes(v))
    throw badRequest(`status must be one of ${BATCH_STATUSES.join(', ')}`, 'status');
  return v as BatchStatus;
}

export function mountBatchesApi(r: Router<GatewayState>, deps: AppDeps): void {
  const auth = [sameOrigin(deps), requireSession(deps), requireCsrf()];
  r.get('/console/api/batches', route('/console/api/batches'), ...auth, async (ctx) => {
    const status = statusParam(ctx.query.status);
    const limit = intParam(ctx.query.limit, 'limit', 50, 1, 200);
    ctx.body = { data: await listConsoleBatches(deps.db, sessionOf(ctx).accountId, { status, limit }) };
  });

  r.post('/console/api/batches/:id/cancel', route('/console/api/batches/:id/cancel'), ...auth, async (ctx) => {
    const accountId = sessionOf(ctx).accountId;
    const b = await getBatchForAccount(deps.db, accountId, ctx.params.id);
    if (!b) throw notFound('No such batch on this account.');
    await cancelBatch(deps, b);
    const r2 = await deps.db.query('SELECT * FROM batches WHERE id = $1 AND account_id = $2', [
      ctx.params.id,
      accountId,
    ]);
    ctx.body = toView(r2.rows[0]);
  });

  r.get(
    '/console/media/batches/:id/:file',
    route('/console/media/batches/:id/:file'),
    requireSession(deps),
    async (ctx) => {
      const which = /^(input|output|error)\.jsonl$/.exec(ctx.params.file)?.[1] as Which | undefined;
      if (!which) throw notFound('No such file.');
      const f = await batchFile(deps.db, sessionOf(ctx).accountId, ctx.params.id, which);
      if (!f) throw notFound('This batch has no such file.');
      ctx.set('vary', 'Cookie');
      ctx.set('cache-control', 'private, no-store');
      ctx.set('content-disposition', `attachment; filename="${ctx.params.id}_${which}.jsonl"`);
      ctx.type = 'application/jsonl';
      ctx.length = Number(f.bytes);
      ctx.body = await deps.storage.get(f.storage_key);
    },
  );
}
