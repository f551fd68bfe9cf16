import Router from '@koa/router';
import type { AppDeps } from '../../operations';
import { multipartBody, requireApiKey, route, type Ctx, type GatewayState } from '../middleware';
import { ApiError, badRequest, notFound } from '../../errors';
import { BatchFileIngest, fileRepo as files } from '../../files';
import { listQuery } from '../listQuery';
import { uploadLineCheck } from '../../batches/lineLimits';
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

export function filesRouter(deps: AppDeps): Router<GatewayState> {
  const r = new Router<GatewayState>();
  const auth = requireApiKey(deps);
  const maxBytes = deps.config.maxBatchFileBytes;
  const lineCheck = uploadLineCheck(deps.catalog);
  const upload = multipartBody(maxBytes, {
    maxFiles: 1,
    fileWriteStreamHandler: (file) =>
      ((file as IngestedFile).ingest = new BatchFileIngest(deps.storage, maxBytes, lineCheck)),
  });

  const ownFile = async (ctx: Ctx): Promise<files.StoredFile> => {
    const id = ctx.params.id;
    const f = await files.getFileForAccount(deps.db, ctx.state.principal!.accountId, id);
    if (!f) throw notFound(`No such File object: ${clip(id)}`, 'file_not_found', 'id');
    return f;
  };

  r.post('/v1/files', route('/v1/files'), auth, async (ctx) => {
    const filesOf = () => (ctx.request as unknown as { files?: Record<string, unknown> }).files ?? {};
    const drop = async () => {
      for (const f of Object.values(filesOf()).flat()) await (f as IngestedFile).ingest?.discard(deps.storage);
    };
    try {
      // A form the parser refuses midway destroys the file streams it opened: each ingest deletes what it stored.
      await upload(ctx, async () => undefined);
    } catch (e) {
      await drop(); // refused after parsing (a field name): the files it listed
      throw e;
    }
    const raw = filesOf();
    const part = raw.file;
    const file = (Array.isArray(part) ? part[0] : part) as IngestedFile | undefined;
    const fields = (ctx.request.body ?? {}) as Record<string, unknown>;
    const others = Object.keys(raw).filter((k) => k !== 'file');
    try {
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
      const stored = await file.ingest.stored;
      const row = await files.insertFile(deps.db, {
        id: files.newFileId(),
        accountId: ctx.state.principal!.accountId,
        purpose: 'batch',
        filename: storableName(file.originalFilename),
        bytes: stored.size,
        storageKey: file.ingest.key,
        lineCount: v.requests,
        model: v.model,
        endpoint: v.endpoint,
      });
      ctx.body = files.fileView(row);
    } catch (e) {
      await drop();
      throw e;
    }
  });

  r.get('/v1/files', route('/v1/files'), auth, async (ctx) => {
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
  });

  r.get('/v1/files/:id', route('/v1/files/:id'), auth, async (ctx) => {
    ctx.body = files.fileView(await ownFile(ctx));
  });

  r.get('/v1/files/:id/content', route('/v1/files/:id/content'), auth, async (ctx) => {
    const f = await ownFile(ctx);
    ctx.set('content-disposition', `attachment; filename="${f.filename.replace(/[^\x20-\x7e]|"/g, '_')}"`);
    ctx.type = 'application/jsonl';
    ctx.length = f.bytes;
    ctx.body = await deps.storage.get(f.storageKey);
  });

  r.delete('/v1/files/:id', route('/v1/files/:id'), auth, async (ctx) => {
    const f = await ownFile(ctx);
    const gone = await files.markDeleted(deps.db, f.accountId, f.id);
    if (!gone) throw notFound(`No such File object: ${clip(f.id)}`, 'file_not_found', 'id');
    // An input file a batch still reads keeps its bytes until the batch has ended.
    if (!(await files.inUseByOpenBatch(deps.db, f.id))) await deps.storage.delete(f.storageKey).catch(() => undefined);
    ctx.body = { id: f.id, object: 'file', deleted: true };
  });

  return r;
}
