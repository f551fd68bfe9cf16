import type Router from '@koa/router';
import type { AppDeps } from '../../operations';
import type { Ctx, GatewayState } from '../middleware';
import { apiRoutes } from '../route';
import { ApiError, badRequest, notFound } from '../../errors';
import { BatchFileIngest, deleteFile, fileContent, recordBatchFile } from '../../files';
import { fileRepo as files } from '../../files';
import { listQuery } from '../listQuery';
import { uploadLineCheck } from '../../jobs/batches';
import { clip, clipJson } from '../../text';

/**
 * The Files API, for batches (docs/batches.md):
 *   POST   /v1/files              multipart `file` + `purpose=batch`: validated as a batch input file while it streams
 *                                 into storage (400 naming the line; nothing kept)
 *   GET    /v1/files              the caller's files, newest first (purpose, limit, after, order)
 *   GET    /v1/files/{id}         the file object
 *   GET    /v1/files/{id}/content the bytes, streamed from storage
 *   DELETE /v1/files/{id}         deletes the file
 * Another account's file is a 404 everywhere.
 */

const PURPOSES = ['batch', 'batch_output'];

/** The client's file name as stored and echoed: printable, at most 255 characters (NUL and the like dropped). */
function storableName(name: string | null | undefined): string {
  const clean = (name ?? '')
    // eslint-disable-next-line no-control-regex
    .replace(/[\u0000-\u001f\u007f]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, '')
    .slice(0, 255);
  return clean || 'batch.jsonl';
}
/** formidable's file object, with the ingest its write-stream handler attached. */
interface IngestedFile {
  originalFilename?: string | null;
  ingest?: BatchFileIngest;
}

const filesOf = (ctx: Ctx) => (ctx.request as unknown as { files?: Record<string, unknown> }).files ?? {};

export function filesRouter(deps: AppDeps): Router<GatewayState> {
  const api = apiRoutes(deps, { shape: 'openai' });
  const maxBytes = deps.config.maxBatchFileBytes;
  const lineCheck = uploadLineCheck(deps.catalog);

  const ownFile = async (ctx: Ctx): Promise<files.StoredFile> => {
    const id = ctx.params.id;
    const f = await files.getFileForAccount(deps.db, ctx.state.principal!.accountId, id);
    if (!f) throw notFound(`No such File object: ${clip(id)}`, 'file_not_found', 'id');
    return f;
  };

  api.add({
    method: 'POST',
    path: '/v1/files',
    body: {
      multipart: maxBytes,
      maxFiles: 1,
      // Each file part streams through the batch-file validator into storage (no temp file).
      fileWriteStreamHandler: (file) =>
        ((file as IngestedFile).ingest = new BatchFileIngest(deps.storage, maxBytes, lineCheck)),
      // A form refused midway destroys the file streams it opened (each ingest deletes what it stored); a form
      // refused after parsing (a field name) or an upload refused here: the files it listed are discarded.
      onFailure: async (ctx) => {
        for (const f of Object.values(filesOf(ctx)).flat()) await (f as IngestedFile).ingest?.discard(deps.storage);
      },
    },
    handler: async (ctx, body) => {
      const raw = filesOf(ctx);
      const part = raw.file;
      const file = (Array.isArray(part) ? part[0] : part) as IngestedFile | undefined;
      const fields = (body ?? {}) as Record<string, unknown>;
      const others = Object.keys(raw).filter((k) => k !== 'file');
      if (others.length)
        throw badRequest(`Unexpected file field ${clipJson(others[0])}.`, others[0], 'unknown_parameter');
      if (!file?.ingest) throw badRequest("Missing required parameter: 'file'.", 'file', 'missing_required_parameter');
      const v = file.ingest.validator;
      if (v.problem) {
        const tooLarge = v.problem.code === 'file_too_large' || v.problem.code === 'line_too_long';
        throw new ApiError(tooLarge ? 413 : 400, v.problem.message, 'invalid_request_error', 'file', v.problem.code);
      }
      const purpose = fields.purpose;
      if (typeof purpose !== 'string')
        throw badRequest("Missing required parameter: 'purpose'.", 'purpose', 'missing_required_parameter');
      if (purpose !== 'batch')
        throw badRequest(
          `Invalid 'purpose' ${clipJson(purpose)}: this gateway accepts files for batches only ('batch').`,
          'purpose',
        );
      for (const k of Object.keys(fields))
        if (k !== 'purpose') throw badRequest(`Unknown parameter: '${clip(k)}'.`, k, 'unknown_parameter');
      const row = await recordBatchFile(
        deps.db,
        ctx.state.principal!.accountId,
        file.ingest,
        storableName(file.originalFilename),
      );
      ctx.body = files.fileView(row);
    },
  });

  api.add({
    method: 'GET',
    path: '/v1/files',
    handler: async (ctx) => {
      const q = listQuery(ctx, { maxLimit: 10_000, defaultLimit: 10_000, idPattern: files.FILE_ID, what: 'a file' });
      const purpose = q.one('purpose');
      if (purpose !== undefined && !PURPOSES.includes(purpose))
        throw badRequest(`Invalid 'purpose' ${clipJson(purpose)}: use one of ${PURPOSES.join(', ')}.`, 'purpose');
      const { files: list, hasMore } = await files.listFiles(deps.db, ctx.state.principal!.accountId, {
        purpose,
        limit: q.limit,
        after: q.after,
        order: q.order,
      });
      ctx.body = {
        object: 'list',
        data: list.map(files.fileView),
        first_id: list[0]?.id ?? null,
        last_id: list.at(-1)?.id ?? null,
        has_more: hasMore,
      };
    },
  });

  api.add({
    method: 'GET',
    path: '/v1/files/:id',
    handler: async (ctx) => {
      ctx.body = files.fileView(await ownFile(ctx));
    },
  });

  api.add({
    method: 'GET',
    path: '/v1/files/:id/content',
    handler: async (ctx) => {
      const f = await ownFile(ctx);
      ctx.set('content-disposition', `attachment; filename="${f.filename.replace(/[^\x20-\x7e]|"/g, '_')}"`);
      ctx.type = 'application/jsonl';
      ctx.length = f.bytes;
      ctx.body = await fileContent(deps.storage, f);
    },
  });

  api.add({
    method: 'DELETE',
    path: '/v1/files/:id',
    handler: async (ctx) => {
      const f = await ownFile(ctx);
      if (!(await deleteFile(deps, f))) throw notFound(`No such File object: ${clip(f.id)}`, 'file_not_found', 'id');
      ctx.body = { id: f.id, object: 'file', deleted: true };
    },
  });

  return api.router;
}
