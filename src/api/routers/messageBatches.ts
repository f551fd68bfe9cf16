import { Readable } from 'node:stream';
import Router from '@koa/router';
import type { AppDeps } from '../../operations';
import { jsonBody, requireApiKey, route, type Ctx, type GatewayState } from '../middleware';
import { ApiError, notFound } from '../../errors';
import { clip } from '../../text';
import { publicBaseUrl } from '../publicUrl';
import * as repo from '../../batches/repo';
import { fileRepo as files, isBlank, readLines, isProblem, parseRequestLine } from '../../files';
import { cancelBatch, createBatch } from '../../batches/service';
import {
  isEnded,
  MESSAGES_ENDPOINT,
  messageBatchLines,
  messageBatchView,
  resultOf,
  unrunResult,
} from '../../batches/messageBatches';

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
 * elsewhere; src/operations/messages/, run by src/batches/execute.ts). Errors in Anthropic's shape (errorHandler
 * gives it to every /v1/messages*).
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
  const r = new Router<GatewayState>();
  const auth = requireApiKey(deps);
  const base = '/v1/messages/batches';

  const resultsUrl = (ctx: Ctx, id: string) =>
    `${publicBaseUrl(ctx, deps.config)}${base}/${encodeURIComponent(id)}/results`;
  const view = async (ctx: Ctx, b: repo.Batch) => {
    if (b.status !== 'expired') return messageBatchView(b, resultsUrl(ctx, b.id));
    // An expired batch counts its unrun requests as failed: the chunks tell those that ran and failed.
    const chunks = await repo.listChunks(deps.db, b.id);
    const ranFailed = chunks.reduce((n, c) => n + c.failed, 0);
    return messageBatchView(b, resultsUrl(ctx, b.id), ranFailed);
  };

  /** The caller's message batch (a batch of /v1/messages lines, not deleted), or a 404. */
  const own = async (ctx: Ctx): Promise<repo.Batch> => {
    const id = ctx.params.id;
    const b = await repo.getBatchForAccount(deps.db, ctx.state.principal!.accountId, id);
    if (!b || b.endpoint !== MESSAGES_ENDPOINT)
      throw notFound(`No message batch found with id '${clip(id)}'.`, 'not_found', 'id');
    ctx.state.model = b.model;
    return b;
  };

  r.post(base, route(base), auth, jsonBody(deps.config.maxMessageBatchJsonBytes), async (ctx) => {
    const p = ctx.state.principal!;
    const { model, lines } = messageBatchLines(ctx.request.body, deps.catalog);
    ctx.state.model = deps.catalog.require(model, ['chat']).id;
    const text = Buffer.from(lines.join('\n') + '\n');
    const key = files.newStorageKey();
    await deps.storage.put(key, Readable.from([text]), 'application/jsonl');
    const fileId = files.newFileId();
    let b: repo.Batch;
    try {
      const f = await files.insertFile(deps.db, {
        id: fileId,
        accountId: p.accountId,
        purpose: 'batch',
        filename: 'message_batch_requests.jsonl',
        bytes: text.length,
        storageKey: key,
        lineCount: lines.length,
        model,
        endpoint: MESSAGES_ENDPOINT,
      });
      const body = {
        input_file_id: f.id,
        endpoint: MESSAGES_ENDPOINT,
        completion_window: '24h',
        metadata: null,
      } as const;
      b = await createBatch(
        deps,
        { accountId: p.accountId, apiKeyId: p.keyId },
        body,
        (m) => {
          ctx.state.model = m;
        },
        ctx.state.span,
      );
    } catch (e) {
      // No batch (refused funds, say): its requests are not kept. A batch that failed to schedule keeps its file.
      if (!(e instanceof ApiError && e.status === 503)) {
        await files.markDeleted(deps.db, p.accountId, fileId).catch(() => undefined);
        await deps.storage.delete(key).catch(() => undefined);
      }
      throw e;
    }
    ctx.body = await view(ctx, b);
  });

  r.get(base, route(base), auth, async (ctx) => {
    const limit = Number(ctx.query.limit ?? 20);
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000)
      throw new ApiError(400, 'limit: an integer from 1 to 1000.', 'invalid_request_error', 'limit', 'invalid_value');
    const after = cursorParam(ctx, 'after_id');
    const before = cursorParam(ctx, 'before_id');
    // Newest first; after_id pages towards older batches, before_id towards newer ones.
    const older = before === null;
    const cursor = before ?? after;
    const rows = await deps.db.query(
      `SELECT id FROM batches b WHERE account_id = $1 AND endpoint = $2 AND deleted_at IS NULL
         AND ($3::text IS NULL OR (created_at, id) ${older ? '<' : '>'}
              (SELECT created_at, id FROM batches WHERE id = $3 AND account_id = $1))
       ORDER BY created_at ${older ? 'DESC' : 'ASC'}, id ${older ? 'DESC' : 'ASC'} LIMIT $4`,
      [ctx.state.principal!.accountId, MESSAGES_ENDPOINT, cursor, limit + 1],
    );
    const ids = rows.rows.slice(0, limit).map((x) => x.id as string);
    if (!older) ids.reverse();
    const list: repo.Batch[] = [];
    for (const id of ids) {
      const b = await repo.getBatch(deps.db, id);
      if (b) list.push(b);
    }
    const data = await Promise.all(list.map((b) => view(ctx, b)));
    ctx.body = {
      data,
      has_more: rows.rows.length > limit,
      first_id: data[0]?.id ?? null,
      last_id: data.at(-1)?.id ?? null,
    };
  });

  r.get(`${base}/:id`, route(`${base}/:id`), auth, async (ctx) => {
    ctx.body = await view(ctx, await own(ctx));
  });

  r.post(`${base}/:id/cancel`, route(`${base}/:id/cancel`), auth, async (ctx) => {
    const b = await own(ctx);
    // Anthropic answers a cancel of an ended batch with the batch as it is.
    ctx.body = await view(ctx, isEnded(b) ? b : await cancelBatch(deps, b));
  });

  r.get(`${base}/:id/results`, route(`${base}/:id/results`), auth, async (ctx) => {
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
    ctx.body = Readable.from(results(b));
  });

  /** Output and error lines as results, then a canceled, expired or errored result for each request never run. */
  async function* results(b: repo.Batch): AsyncGenerator<Buffer> {
    const seen = new Set<string>();
    for (const fileId of [b.outputFileId, b.errorFileId]) {
      if (!fileId) continue;
      const f = await files.getFileForAccount(deps.db, b.accountId, fileId);
      if (!f) continue;
      let out = '';
      for await (const l of readLines(await deps.storage.get(f.storageKey))) {
        if (isBlank(l.bytes)) continue;
        const res = resultOf(JSON.parse(l.bytes.toString('utf8')));
        seen.add(res.custom_id);
        out += JSON.stringify(res) + '\n';
        if (out.length >= 65536) {
          yield Buffer.from(out);
          out = '';
        }
      }
      if (out) yield Buffer.from(out);
    }
    if (seen.size >= b.total) return;
    const input = await deps.db.query('SELECT storage_key FROM files WHERE id = $1', [b.inputFileId]);
    if (!input.rowCount) return;
    let out = '';
    for await (const l of readLines(await deps.storage.get(input.rows[0].storage_key))) {
      if (isBlank(l.bytes)) continue;
      const line = parseRequestLine(l);
      if (isProblem(line) || seen.has(line.custom_id)) continue;
      out += JSON.stringify(unrunResult(b, line.custom_id)) + '\n';
      if (out.length >= 65536) {
        yield Buffer.from(out);
        out = '';
      }
    }
    if (out) yield Buffer.from(out);
  }

  r.delete(`${base}/:id`, route(`${base}/:id`), auth, async (ctx) => {
    const b = await own(ctx);
    if (!isEnded(b))
      throw new ApiError(
        400,
        `Message batch ${b.id} cannot be deleted while it is processing; cancel it first.`,
        'invalid_request_error',
        null,
        'batch_not_ended',
      );
    for (const fileId of [b.inputFileId, b.outputFileId, b.errorFileId]) {
      if (!fileId) continue;
      const f = await files.markDeleted(deps.db, b.accountId, fileId);
      if (f) await deps.storage.delete(f.storageKey).catch(() => undefined);
    }
    // Its money and usage stay on record: the batch row is kept, marked deleted for every API (OpenAI's too).
    await repo.markBatchDeleted(deps.db, b.id);
    ctx.body = { id: b.id, type: 'message_batch_deleted' };
  });

  return r;
}
