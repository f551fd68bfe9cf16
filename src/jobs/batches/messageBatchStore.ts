import { Readable } from 'node:stream';
import type { Span } from '@opentelemetry/api';
import type { Queryable } from '../../db';
import { ApiError } from '../../errors';
import { fileRepo as files, isBlank, readLines, isProblem, parseRequestLine } from '../../files';
import * as repo from './repo';
import { createBatch, type BatchServiceDeps } from './service';
import { MESSAGES_ENDPOINT, resultOf, unrunResult } from './messageBatches';

/**
 * What Anthropic's Message Batches (src/api/routers/messageBatches.ts) keep and read, over the gateway's batches:
 * the requests stored as an input file of /v1/messages lines, the list by Anthropic's cursors, the results as
 * JSONL, the delete of an ended batch with its files.
 */

/** Stores the requests' lines as the batch's input file, then creates the batch (hold, workflow). */
export async function createMessageBatch(
  deps: BatchServiceDeps,
  who: { accountId: string; apiKeyId: string | null },
  input: { model: string; lines: string[] },
  onModel: (model: string) => void,
  trace?: Span,
): Promise<repo.Batch> {
  const text = Buffer.from(input.lines.join('\n') + '\n');
  const key = files.newStorageKey();
  await deps.storage.put(key, Readable.from([text]), 'application/jsonl');
  const fileId = files.newFileId();
  try {
    const f = await files.insertFile(deps.db, {
      id: fileId,
      accountId: who.accountId,
      purpose: 'batch',
      filename: 'message_batch_requests.jsonl',
      bytes: text.length,
      storageKey: key,
      lineCount: input.lines.length,
      model: input.model,
      endpoint: MESSAGES_ENDPOINT,
    });
    const body = {
      input_file_id: f.id,
      endpoint: MESSAGES_ENDPOINT,
      completion_window: '24h',
      metadata: null,
    } as const;
    return await createBatch(deps, who, body, onModel, trace);
  } catch (e) {
    // No batch (refused funds, say): its requests are not kept. A batch that failed to schedule keeps its file.
    if (!(e instanceof ApiError && e.status === 503)) {
      await files.markDeleted(deps.db, who.accountId, fileId).catch(() => undefined);
      await deps.storage.delete(key).catch(() => undefined);
    }
    throw e;
  }
}

/**
 * A page of the account's message batches, newest first; after_id pages towards older batches, before_id towards
 * newer ones (then the page is still given newest first).
 */
export async function listMessageBatches(
  db: Queryable,
  accountId: string,
  q: { limit: number; after: string | null; before: string | null },
): Promise<{ batches: repo.Batch[]; hasMore: boolean }> {
  const older = q.before === null;
  const cursor = q.before ?? q.after;
  const rows = await db.query(
    `SELECT id FROM batches b WHERE account_id = $1 AND endpoint = $2 AND deleted_at IS NULL
       AND ($3::text IS NULL OR (created_at, id) ${older ? '<' : '>'}
            (SELECT created_at, id FROM batches WHERE id = $3 AND account_id = $1))
     ORDER BY created_at ${older ? 'DESC' : 'ASC'}, id ${older ? 'DESC' : 'ASC'} LIMIT $4`,
    [accountId, MESSAGES_ENDPOINT, cursor, q.limit + 1],
  );
  const ids = rows.rows.slice(0, q.limit).map((x) => x.id as string);
  if (!older) ids.reverse();
  const batches: repo.Batch[] = [];
  for (const id of ids) {
    const b = await repo.getBatch(db, id);
    if (b) batches.push(b);
  }
  return { batches, hasMore: rows.rows.length > q.limit };
}

/** Of an expired batch, the requests that ran and failed (its unrun ones count as failed too). */
export async function ranFailed(db: Queryable, b: repo.Batch): Promise<number> {
  const chunks = await repo.listChunks(db, b.id);
  return chunks.reduce((n, c) => n + c.failed, 0);
}

/** Output and error lines as results, then a canceled, expired or errored result for each request never run. */
export async function* messageBatchResults(
  deps: Pick<BatchServiceDeps, 'db' | 'storage'>,
  b: repo.Batch,
): AsyncGenerator<Buffer> {
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

/** An ended batch's files go; the batch row stays (its money and usage), marked deleted for every API. */
export async function deleteMessageBatch(deps: Pick<BatchServiceDeps, 'db' | 'storage'>, b: repo.Batch): Promise<void> {
  for (const fileId of [b.inputFileId, b.outputFileId, b.errorFileId]) {
    if (!fileId) continue;
    const f = await files.markDeleted(deps.db, b.accountId, fileId);
    if (f) await deps.storage.delete(f.storageKey).catch(() => undefined);
  }
  await repo.markBatchDeleted(deps.db, b.id);
}
