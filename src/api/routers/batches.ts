import Router from '@koa/router';
import type { AppDeps } from '../../operations';
import { jsonApi, requireApiKey, route, type Ctx, type GatewayState } from '../middleware';
import { notFound } from '../../errors';
import { clip } from '../../text';
import * as repo from '../../batches/repo';
import { cancelBatch, createBatch, parseCreateBody } from '../../batches/service';
import { listQuery } from '../listQuery';

/**
 * The Batch API (OpenAI's; docs/batches.md):
 *   POST /v1/batches              input_file_id, endpoint, completion_window "24h", metadata: hold the maximum
 *                                 cost (402 when it cannot be covered), start the workflow -> the batch
 *   GET  /v1/batches/{id}         the batch
 *   GET  /v1/batches              the caller's batches, newest first (limit 1-100, after)
 *   POST /v1/batches/{id}/cancel  cancelling, then cancelled (finished items charged, the rest released)
 * Another account's batch is a 404 everywhere.
 */

const ts = (d: Date | null) => (d ? Math.floor(d.getTime() / 1000) : null);

export function batchView(b: repo.Batch): Record<string, unknown> {
  return {
    id: b.id,
    object: 'batch',
    endpoint: b.endpoint,
    model: b.model,
    errors: b.errors?.length ? { object: 'list', data: b.errors } : null,
    input_file_id: b.inputFileId,
    completion_window: b.completionWindow,
    status: b.status,
    output_file_id: b.outputFileId,
    error_file_id: b.errorFileId,
    created_at: ts(b.createdAt),
    in_progress_at: ts(b.inProgressAt),
    expires_at: ts(b.expiresAt),
    finalizing_at: ts(b.finalizingAt),
    completed_at: ts(b.completedAt),
    failed_at: ts(b.failedAt),
    expired_at: ts(b.expiredAt),
    cancelling_at: ts(b.cancellingAt),
    cancelled_at: ts(b.cancelledAt),
    request_counts: { total: b.total, completed: b.completed, failed: b.failed },
    metadata: b.metadata,
    // The gateway's additions: the hold placed at creation and what has been charged so far (VND).
    max_cost_vnd: b.maxCostVnd,
    cost_vnd: b.costVnd,
  };
}

export function batchesRouter(deps: AppDeps): Router<GatewayState> {
  const r = new Router<GatewayState>();
  const auth = requireApiKey(deps);

  const ownBatch = async (ctx: Ctx): Promise<repo.Batch> => {
    const id = ctx.params.id;
    const b = await repo.getBatchForAccount(deps.db, ctx.state.principal!.accountId, id);
    if (!b) throw notFound(`No batch found with id '${clip(id)}'.`, 'batch_not_found', 'id');
    ctx.state.model = b.model;
    return b;
  };

  r.post('/v1/batches', jsonApi(deps, '/v1/batches', 64 * 1024), async (ctx) => {
    const p = ctx.state.principal!;
    const b = await createBatch(
      deps,
      { accountId: p.accountId, apiKeyId: p.keyId },
      parseCreateBody(ctx.request.body),
      (m) => {
        ctx.state.model = m;
      },
      ctx.state.span,
    );
    ctx.body = batchView(b);
  });

  r.get('/v1/batches', route('/v1/batches'), auth, async (ctx) => {
    const q = listQuery(ctx, { maxLimit: 100, defaultLimit: 20, idPattern: repo.BATCH_ID, what: 'a batch' });
    const { batches, hasMore } = await repo.listBatches(deps.db, ctx.state.principal!.accountId, q);
    ctx.body = {
      object: 'list',
      data: batches.map(batchView),
      first_id: batches[0]?.id ?? null,
      last_id: batches.at(-1)?.id ?? null,
      has_more: hasMore,
    };
  });

  r.get('/v1/batches/:id', route('/v1/batches/:id'), auth, async (ctx) => {
    ctx.body = batchView(await ownBatch(ctx));
  });

  r.post('/v1/batches/:id/cancel', route('/v1/batches/:id/cancel'), auth, async (ctx) => {
    ctx.body = batchView(await cancelBatch(deps, await ownBatch(ctx)));
  });

  return r;
}
