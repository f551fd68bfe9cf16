import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { Db } from '../src/db/pool';
import type { Storage } from '../src/storage/storage';
import type { Catalog } from '../src/catalog/catalog';
import type { Logger } from '../src/observability/logger';
import type { ProviderRegistry } from '../src/providers/registry';
import type { ModelRouter } from '../src/routing/modelRouter';
import * as batches from '../src/batches/repo';
import { executeItem, waitForHealthy, type ItemOutcome } from '../src/batches/execute';
import { OPERATION_OF } from '../src/batches/endpoints';
import { KeyPacer } from '../src/batches/pacer';
import { finalizeBatch } from '../src/batches/finalize';
import { itemUsageId, outputLine } from '../src/batches/outputLines';
import type { BatchSettings } from '../src/batches/settings';
import type {
  BatchActivities,
  BatchArgs,
  BatchJobResult,
  BatchPosition,
  ChunkArgs,
  ChunkOutcome,
  FinalizeArgs,
  StartOutcome,
} from '../src/batches/workflowContract';
import { isBlank, readLines, type Line } from '../src/files/lines';
import { isProblem, parseRequestLine, type BatchEndpoint } from '../src/files/batchInput';

/**
 * The batch workflow's activities (workflows/batchJob.ts), built from injected dependencies. Each is safe to run
 * again: a chunk is committed once (its row, its charges and its parts in one transaction; a rerun finds the row),
 * usage records are keyed by (batch, custom_id), final files have ids and keys derived from the batch id, and the
 * batch's final status and release commit together once.
 */

export interface BatchActivityDeps {
  db: Db;
  storage: Storage;
  catalog: Catalog;
  providers: ProviderRegistry;
  router: ModelRouter;
  settings: BatchSettings;
  logger?: Logger;
}

export { itemUsageId, outputLine } from '../src/batches/outputLines';

/** Statuses of an item worth trying again (the upstream's or the router's transient failures). */
const TRANSIENT = new Set([408, 409, 429, 500, 502, 503, 504]);
const ITEM_ATTEMPTS = 4;

export function createBatchActivities(deps: BatchActivityDeps): BatchActivities {
  const { db, storage, catalog, settings } = deps;
  const pacer = new KeyPacer(db, settings.keyLimitShare);

  async function load(batchId: string) {
    const b = await batches.getBatch(db, batchId);
    if (!b) throw ApplicationFailure.nonRetryable(`batch ${batchId} not found`, 'BatchNotFound');
    const r = await db.query('SELECT * FROM files WHERE id = $1', [b.inputFileId]);
    return { b, input: r.rows[0] as { storage_key: string; bytes: string } | undefined };
  }

  async function position(batchId: string, inputBytes: number): Promise<BatchPosition> {
    const chunks = await batches.listChunks(db, batchId);
    const last = chunks.at(-1);
    const offset = last?.nextOffset ?? 0;
    const line = last ? last.firstLine + last.lines - 1 : 0;
    return { chunk: chunks.length, offset, line, done: offset >= inputBytes };
  }

  return {
    /** Moves the batch to in_progress (from validating) and tells the workflow where to resume. */
    async startBatch(a: BatchArgs): Promise<StartOutcome> {
      const { b, input } = await load(a.batchId);
      const pos = await position(a.batchId, Number(input?.bytes ?? 0));
      if (batches.isFinal(b.status)) return { ...pos, final: true, cancelRequested: false };
      if (!input || !(await storage.head(input.storage_key)))
        return { ...pos, final: false, cancelRequested: false, failure: 'The input file is no longer available.' };
      await batches.transition(db, a.batchId, ['validating'], 'in_progress');
      return { ...pos, final: false, cancelRequested: b.status === 'cancelling' };
    },

    /**
     * Runs the next chunk of lines (up to chunkLines requests from `offset`) at bounded concurrency, each through
     * the routed path, paced to the key's share; writes the chunk's output and error parts; commits the chunk.
     */
    async runChunk(a: ChunkArgs): Promise<ChunkOutcome> {
      const ctx = Context.current();
      const { b, input } = await load(a.batchId);
      const bytes = Number(input?.bytes ?? 0);
      const had = await batches.getChunk(db, a.batchId, a.chunk);
      const cancelRequested = b.status === 'cancelling';
      if (had)
        return {
          chunk: a.chunk + 1,
          offset: had.nextOffset,
          line: had.firstLine + had.lines - 1,
          done: had.nextOffset >= bytes,
          completed: had.completed,
          failed: had.failed,
          cancelRequested,
        };
      if (!input) throw ApplicationFailure.nonRetryable('The input file is no longer available.', 'InputMissing');
      const model = catalog.get(b.model);
      const endpoint = b.endpoint as BatchEndpoint;
      const operation = OPERATION_OF[endpoint];
      const stream =
        a.offset < bytes ? await storage.get(input.storage_key, { start: a.offset, end: bytes - 1 }) : null;
      const outputs: string[] = [];
      const errors: string[] = [];
      const usages: batches.ItemUsage[] = [];
      let completed = 0;
      let failed = 0;
      let requests = 0;
      let offset = a.offset;
      let line = a.line;
      let lastBeat = 0;
      const inFlight = new Set<Promise<void>>();
      const signal = ctx.cancellationSignal;

      const runOne = async (l: Line) => {
        const r = parseRequestLine(l);
        if (isProblem(r)) {
          // Checked at upload; a line that no longer parses fails alone.
          failed++;
          const id = itemUsageId(a.batchId, `line:${l.no}`);
          errors.push(
            outputLine(id, `line:${l.no}`, null, { code: 'invalid_request', message: r.message.slice(0, 500) }),
          );
          return;
        }
        const usageId = itemUsageId(a.batchId, r.custom_id);
        const started = performance.now();
        let o: ItemOutcome;
        if (!model) {
          o = {
            statusCode: 404,
            body: {
              error: {
                message: `The model '${b.model}' is no longer served.`,
                type: 'invalid_request_error',
                param: 'model',
                code: 'model_not_found',
              },
            },
            cost: 0,
            units: {},
            pricing: null,
            model: b.model,
            deployment: null,
            routing: null,
          };
        } else {
          // A transient upstream failure (429, 5xx, timeout) left by the router's tries is tried again after the
          // deployments' cooldown: batch work can wait, and a request is failed only when it keeps failing.
          for (let attempt = 1; ; attempt++) {
            await waitForHealthy(deps, model, signal);
            await pacer.acquire(b.apiKeyId, signal);
            o = await executeItem(deps, model, endpoint, structuredClone(r.body), operation, signal);
            pacer.spent(b.apiKeyId, (o.units.prompt_tokens ?? 0) + (o.units.completion_tokens ?? 0));
            if (!TRANSIENT.has(o.statusCode) || attempt >= ITEM_ATTEMPTS || signal.aborted) break;
            await new Promise((res) => setTimeout(res, Math.min(8000, 250 * 2 ** attempt)));
          }
        }
        usages.push({
          usage: {
            id: usageId,
            apiKeyId: b.apiKeyId,
            model: o.model,
            operation,
            units: o.units,
            latencyMs: performance.now() - started,
            status: o.statusCode,
            deployment: o.deployment,
            routing: o.routing,
            pricing: o.statusCode === 200 ? o.pricing : null,
          },
          cost: o.statusCode === 200 ? o.cost : 0,
        });
        if (o.statusCode === 200) {
          completed++;
          outputs.push(outputLine(usageId, r.custom_id, o));
        } else {
          failed++;
          errors.push(outputLine(usageId, r.custom_id, o));
        }
      };

      if (stream) {
        try {
          for await (const l of readLines(stream, a.offset, a.line)) {
            offset = l.end;
            line = l.no;
            if (isBlank(l.bytes)) continue;
            requests++;
            const p: Promise<void> = runOne(l).finally(() => inFlight.delete(p));
            inFlight.add(p);
            if (inFlight.size >= settings.concurrency) await Promise.race(inFlight);
            const now = Date.now();
            if (now - lastBeat >= 1000) {
              lastBeat = now;
              ctx.heartbeat({ chunk: a.chunk, offset, done: completed + failed });
            }
            if (requests >= settings.chunkLines) break;
          }
        } finally {
          stream.destroy();
        }
        await Promise.all(inFlight);
      }
      if (requests === 0) return { chunk: a.chunk, offset, line, done: true, completed: 0, failed: 0, cancelRequested };
      const part = async (lines: string[], kind: string) => {
        if (!lines.length) return null;
        const key = `batches/${a.batchId}/parts/${a.chunk}-${randomBytes(6).toString('hex')}.${kind}.jsonl`;
        await storage.put(key, Readable.from([Buffer.from(lines.join(''))]), 'application/jsonl');
        return key;
      };
      const outputKey = await part(outputs, 'output');
      const errorKey = await part(errors, 'error');
      const row: batches.ChunkRow = {
        chunk: a.chunk,
        firstLine: a.line + 1,
        lines: line - a.line,
        nextOffset: offset,
        completed,
        failed,
        costVnd: 0,
        outputKey,
        errorKey,
      };
      const c = await batches.commitChunk(
        db,
        { batchId: a.batchId, accountId: b.accountId, holdId: b.holdId },
        row,
        usages,
      );
      if (!c.committed) {
        // A twin attempt committed this chunk first: its parts count, ours are dropped.
        for (const k of [outputKey, errorKey]) if (k) await storage.delete(k).catch(() => undefined);
      }
      const now = await batches.getBatch(db, a.batchId);
      return {
        chunk: a.chunk + 1,
        offset: c.row.nextOffset,
        line: c.row.firstLine + c.row.lines - 1,
        done: c.row.nextOffset >= bytes,
        completed: c.row.completed,
        failed: c.row.failed,
        cancelRequested: now?.status === 'cancelling',
      };
    },

    /** in_progress -> finalizing (every line has run). */
    async markFinalizing(a: BatchArgs): Promise<void> {
      await batches.transition(db, a.batchId, ['in_progress'], 'finalizing');
    },

    /** The output and error files, then the batch's end (src/batches/finalize.ts); a retry answers what was stored. */
    async finalizeBatch(a: FinalizeArgs): Promise<BatchJobResult> {
      const ctx = Context.current();
      const done = await finalizeBatch({ db, storage }, a, (p) => ctx.heartbeat(p));
      return { status: done.status };
    },
  };
}

export type { BatchActivities };
