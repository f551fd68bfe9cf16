import { Readable } from 'node:stream';
import type Router from '@koa/router';
import type { AppDeps } from '../../operations';
import type { Ctx, GatewayState } from '../middleware';
import { apiRoutes } from '../route';
import { ApiError, notFound } from '../../errors';
import { clip } from '../../text';
import { publicBaseUrl } from '../publicUrl';
import { batchRepo as repo } from '../../jobs/batches';
import {
  cancelBatch,
  isEnded,
  MESSAGES_ENDPOINT,
  messageBatchLines,
  messageBatchView,
  createMessageBatch,
  deleteMessageBatch,
  listMessageBatches,
  messageBatchResults,
  ranFailed,
} from '../../jobs/batches';

/**
 * Anthropic's Message Batches (docs/batches.md), a router over the gateway's batches, not a second engine:
 *   POST   /v1/messages/batches               requests [{custom_id, params}] -> an input file of /v1/messages lines
 *                                             -> a batch (hold, workflow) -> the message_batch
 *   GET    /v1/messages/batches               the caller's message batches, newest first (limit, after_id, before_id)
 *   GET    /v1/messages/batches/{id}          the message_batch
 *   POST   /v1/messages/batches/{id}/cancel   canceling, then ended (finished requests charged, the rest released)
 *   GET    /v1/messages/batches/{id}/results  JSONL of {custom_id, result}, once ended
 *   DELETE /v1/messages/batches/{id}          once ended: its files go, the batch is no longer listed
 * On any chat model: each request runs through the /v1/messages paths (native on an Anthropic provider, translated
 * elsewhere; src/operations/messages/, run by src/jobs/batches/execute.ts). Errors in Anthropic's shape (errorHandler
 * gives it to every /v1/messages*; no shape is set, so the rate-limit headers stay OpenAI's as before).
 */

/** A list cursor: a message batch id, given at most once (anything else, NUL included, is a 400, not a query). */
function cursorParam(ctx: Ctx, k: 'after_id' | 'before_id'): string | null {
  const v = ctx.query[k];
  if (v === undefined) return null;
  if (typeof v !== 'string' || !repo.BATCH_ID.test(v))
    throw new ApiError(400, `${k}: the id of a message batch.`, 'invalid_request_error', k, 'invalid_value');
  return v;
}

export function messageBatchesRouter(deps: AppDeps): Router<GatewayState> {
  const api = apiRoutes(deps);
  const base = '/v1/messages/batches';

  const resultsUrl = (ctx: Ctx, id: string) =>
    `${publicBaseUrl(ctx, deps.config)}${base}/${encodeURIComponent(id)}/results`;
  const view = async (ctx: Ctx, b: repo.Batch) =>
    b.status !== 'expired'
      ? messageBatchView(b, resultsUrl(ctx, b.id))
      : // An expired batch counts its unrun requests as failed: the chunks tell those that ran and failed.
        messageBatchView(b, resultsUrl(ctx, b.id), await ranFailed(deps.db, b));

  /** The caller's message batch (a batch of /v1/messages lines, not deleted), or a 404. */
  const own = async (ctx: Ctx): Promise<repo.Batch> => {
    const id = ctx.params.id;
    const b = await repo.getBatchForAccount(deps.db, ctx.state.principal!.accountId, id);
    if (!b || b.endpoint !== MESSAGES_ENDPOINT)
      throw notFound(`No message batch found with id '${clip(id)}'.`, 'not_found', 'id');
    ctx.state.model = b.model;
    return b;
  };

  api.add({
    method: 'POST',
    path: base,
    body: { json: deps.config.maxMessageBatchJsonBytes },
    handler: async (ctx, body) => {
      const p = ctx.state.principal!;
      const input = messageBatchLines(body, deps.catalog);
      ctx.state.model = deps.catalog.require(input.model, ['chat']).id;
      const b = await createMessageBatch(
        deps,
        { accountId: p.accountId, apiKeyId: p.keyId },
        input,
        (m) => {
          ctx.state.model = m;
        },
        ctx.state.span,
      );
      ctx.body = await view(ctx, b);
    },
  });

  api.add({
    method: 'GET',
    path: base,
    handler: async (ctx) => {
      const limit = Number(ctx.query.limit ?? 20);
      if (!Number.isInteger(limit) || limit < 1 || limit > 1000)
        throw new ApiError(400, 'limit: an integer from 1 to 1000.', 'invalid_request_error', 'limit', 'invalid_value');
      const after = cursorParam(ctx, 'after_id');
      const before = cursorParam(ctx, 'before_id');
      const { batches, hasMore } = await listMessageBatches(deps.db, ctx.state.principal!.accountId, {
        limit,
        after,
        before,
      });
      const data = await Promise.all(batches.map((b) => view(ctx, b)));
      ctx.body = { data, has_more: hasMore, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null };
    },
  });

  api.add({
    method: 'GET',
    path: `${base}/:id`,
    handler: async (ctx) => {
      ctx.body = await view(ctx, await own(ctx));
    },
  });

  api.add({
    method: 'POST',
    path: `${base}/:id/cancel`,
    handler: async (ctx) => {
      const b = await own(ctx);
      // Anthropic answers a cancel of an ended batch with the batch as it is.
      ctx.body = await view(ctx, isEnded(b) ? b : await cancelBatch(deps, b));
    },
  });

  api.add({
    method: 'GET',
    path: `${base}/:id/results`,
    handler: async (ctx) => {
      const b = await own(ctx);
      if (!isEnded(b))
        throw new ApiError(
          400,
          `Message batch ${b.id} has not ended; its results are available once processing_status is "ended".`,
          'invalid_request_error',
          null,
          'batch_not_ended',
        );
      ctx.type = 'application/binary';
      ctx.body = Readable.from(messageBatchResults(deps, b));
    },
  });

  api.add({
    method: 'DELETE',
    path: `${base}/:id`,
    handler: async (ctx) => {
      const b = await own(ctx);
      if (!isEnded(b))
        throw new ApiError(
          400,
          `Message batch ${b.id} cannot be deleted while it is processing; cancel it first.`,
          'invalid_request_error',
          null,
          'batch_not_ended',
        );
      // Its money and usage stay on record: the batch row is kept, marked deleted for every API (OpenAI's too).
      await deleteMessageBatch(deps, b);
      ctx.body = { id: b.id, type: 'message_batch_deleted' };
    },
  });

  return api.router;
}
