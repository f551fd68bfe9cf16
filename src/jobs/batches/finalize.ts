import { Readable } from 'node:stream';
import type { Db } from '../../db';
import type { Storage } from '../../storage';
import { fileRepo as files } from '../../files';
import { isBlank, readLines, isProblem, parseRequestLine } from '../../files';
import * as batches from './repo';
import * as progress from './lineProgress';
import { derivedFileId, EXPIRED, itemUsageId, outputLine } from './outputLines';
import type { FinalizeArgs } from './workflowContract';

/**
 * A batch's final step, for its workflow (./activities.ts finalizeBatch) and for the reconciler that ends a
 * batch whose workflow closed without doing so: joins the chunks' parts into the output and error files (and, for
 * an expired batch, an error line `batch_expired` for each request that never ran), then ends the batch
 * (batches.finishBatch: the rest of the hold released, the status, the files, the counts and the final event, in one
 * transaction). Idempotent: file ids and keys derive from the batch id, and a batch already final answers its stored
 * outcome. `beat` is called as each part is copied (an activity heartbeats there).
 */
export async function finalizeBatch(
  deps: { db: Db; storage: Storage; staleMs?: number },
  a: FinalizeArgs,
  beat: (progress: { chunk: number }) => void = () => undefined,
): Promise<batches.FinishOutcome> {
  const done = await finalizeAndEnd(deps, a, beat);
  // Ended: a line still claimed by a dead worker's attempt is settled by nothing now; it is the gateway's cost.
  await progress.recordInterruptedAtEnd(deps.db, a.batchId, deps.staleMs ?? 0);
  return done;
}

async function finalizeAndEnd(
  deps: { db: Db; storage: Storage },
  a: FinalizeArgs,
  beat: (progress: { chunk: number }) => void,
): Promise<batches.FinishOutcome> {
  const { db, storage } = deps;
  const b = await batches.getBatch(db, a.batchId);
  if (!b) throw new Error(`batch ${a.batchId} not found`);
  const input = (await db.query('SELECT storage_key, bytes FROM files WHERE id = $1', [b.inputFileId])).rows[0] as
    { storage_key: string; bytes: string } | undefined;
  // Final already (this step retried after its commit, or a reconciler ended it): the stored outcome, so the
  // workflow still announces it (the event is recorded once, by the commit; its emission starts deliveries).
  if (batches.isFinal(b.status))
    return batches.finishBatch(db, { ...a, holdId: b.holdId, outputFileId: null, errorFileId: null });
  const chunks = await batches.listChunks(db, a.batchId);
  const bytes = Number(input?.bytes ?? 0);
  // Lines a chunk's attempt had answered but never committed (its workflow closed, or the chunk kept failing): the
  // provider ran them, so they are charged and listed, as the batch's last chunk (committed once), not dropped.
  const answered = await commitAnswered(deps, b, chunks, input?.storage_key ?? null, bytes);
  if (answered) {
    chunks.push(answered);
    a = {
      ...a,
      offset: Math.max(a.offset, answered.nextOffset),
      line: Math.max(a.line, answered.firstLine + answered.lines - 1),
    };
  }
  let unfinished = 0;
  async function* parts(kind: 'outputKey' | 'errorKey', tail: boolean) {
    for (const c of chunks) {
      const k = c[kind];
      if (!k) continue;
      for await (const piece of await storage.get(k)) yield piece as Buffer;
      beat({ chunk: c.chunk });
    }
    if (!tail || !input || a.offset >= bytes) return;
    let batch = '';
    for await (const l of readLines(
      await storage.get(input.storage_key, { start: a.offset, end: bytes - 1 }),
      a.offset,
      a.line,
    )) {
      if (isBlank(l.bytes)) continue;
      const r = parseRequestLine(l);
      const customId = isProblem(r) ? `line:${l.no}` : r.custom_id;
      unfinished++;
      batch += outputLine(itemUsageId(a.batchId, customId), customId, null, EXPIRED);
      if (batch.length > 65536) {
        yield Buffer.from(batch);
        batch = '';
      }
    }
    if (batch) yield Buffer.from(batch);
  }
  const store = async (what: 'output' | 'error', tail: boolean, has: boolean): Promise<string | null> => {
    if (!has) return null;
    const key = `batches/${a.batchId}/${what}.jsonl`;
    const s = await storage.put(
      key,
      Readable.from(parts(what === 'output' ? 'outputKey' : 'errorKey', tail)),
      'application/jsonl',
    );
    if (s.size === 0) {
      await storage.delete(key).catch(() => undefined);
      return null;
    }
    const f = await files.insertFile(db, {
      id: derivedFileId(a.batchId, what),
      accountId: b.accountId,
      purpose: 'batch_output',
      filename: `${a.batchId}_${what}.jsonl`,
      bytes: s.size,
      storageKey: key,
      lineCount: null,
      model: null,
      endpoint: null,
    });
    return f.id;
  };
  const expires = a.status === 'expired';
  const outputFileId = await store(
    'output',
    false,
    chunks.some((c) => c.outputKey),
  );
  const errorFileId = await store('error', expires, expires || chunks.some((c) => c.errorKey));
  const errors = a.failure ? [{ code: 'batch_failed', message: a.failure, param: null, line: null }] : null;
  const done = await batches.finishBatch(db, {
    batchId: a.batchId,
    holdId: b.holdId,
    status: a.status,
    outputFileId,
    errorFileId,
    errors,
    unfinished: expires ? unfinished : 0,
  });
  // The parts are joined into the files: drop them (best effort; a leftover part is never read again).
  for (const c of chunks)
    for (const k of [c.outputKey, c.errorKey]) if (k) await storage.delete(k).catch(() => undefined);
  return done;
}

/** Commits the answered lines after the last committed chunk as one more chunk: its row, or null when none. */
async function commitAnswered(
  deps: { db: Db; storage: Storage },
  b: batches.Batch,
  chunks: batches.ChunkRow[],
  inputKey: string | null,
  bytes: number,
): Promise<batches.ChunkRow | null> {
  const { db, storage } = deps;
  const last = chunks.at(-1);
  const after = last ? last.firstLine + last.lines - 1 : 0;
  const lines = await progress.answeredAfter(db, b.id, after);
  if (!lines.length) return null;
  const lastLine = lines.at(-1)!.lineNo;
  // Where the input goes on after the last answered line (what a chunk row records).
  let nextOffset = last?.nextOffset ?? 0;
  if (inputKey && nextOffset < bytes)
    for await (const l of readLines(
      await storage.get(inputKey, { start: nextOffset, end: bytes - 1 }),
      nextOffset,
      after,
    )) {
      nextOffset = l.end;
      if (l.no >= lastLine) break;
    }
  const part = async (ls: typeof lines, kind: string) => {
    if (!ls.length) return null;
    const key = `batches/${b.id}/parts/${chunks.length}-answered.${kind}.jsonl`;
    await storage.put(key, Readable.from([Buffer.from(ls.map((l) => l.outLine).join(''))]), 'application/jsonl');
    return key;
  };
  const ok = lines.filter((l) => l.ok);
  const failed = lines.filter((l) => !l.ok);
  const row: batches.ChunkRow = {
    chunk: chunks.length,
    firstLine: after + 1,
    lines: lastLine - after,
    nextOffset,
    completed: ok.length,
    failed: failed.length,
    costVnd: 0,
    outputKey: await part(ok, 'output'),
    errorKey: await part(failed, 'error'),
  };
  const items = lines.flatMap((l) => (l.item ? [l.item] : []));
  const c = await batches.commitChunk(db, { batchId: b.id, accountId: b.accountId, holdId: b.holdId }, row, items);
  await progress.dropLines(db, b.id, c.row.firstLine, c.row.firstLine + c.row.lines - 1);
  // An attempt still running committed this chunk first: its parts count.
  if (!c.committed)
    for (const k of [row.outputKey, row.errorKey])
      if (k && k !== c.row.outputKey && k !== c.row.errorKey) await storage.delete(k).catch(() => undefined);
  return c.row;
}
