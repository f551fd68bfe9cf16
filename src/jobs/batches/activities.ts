import { randomBytes } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { Readable } from 'node:stream';
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { Db } from '../../db';
import { gated } from '../../db';
import type { Storage } from '../../storage';
import type { Catalog } from '../../catalog';
import type { Logger } from '../../observability';
import type { ProviderRegistry } from '../../providers';
import { type ModelRouter, waitForHealthy } from '../../modelCall';
import * as batches from './repo';
import { executeItem, type ItemOutcome } from './execute';
import { OPERATION_OF } from './endpoints';
import { KeyPacer } from '../keyPacer';
import { finalizeBatch } from './finalize';
import { createBatchSlotActivities } from './slotActivities';
import { createBatchTargetActivities } from './target';
import { itemUsageId, outputLine } from './outputLines';
import type { BatchSettings } from './settings';
import type {
  BatchActivities,
  BatchArgs,
  BatchJobResult,
  BatchPosition,
  ChunkArgs,
  ChunkOutcome,
  FinalizeArgs,
  StartOutcome,
} from './workflowContract';
import { isBlank, readLines, type Line, isProblem, parseRequestLine, type BatchEndpoint } from '../../files';
import * as progress from './lineProgress';
import { interruptedLineCost } from './lineCosts';
import type { GatewayCost } from '../../billing';
import type { LineOutcome } from './lineProgress';
import { ApiError } from '../../errors';
import { openAIBody } from '../../errorBodies';

/**
 * The batch workflow's activities (src/jobs/batches/workflow.ts), built from injected dependencies. Each is safe to run
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

export { itemUsageId, outputLine } from './outputLines';

/** Statuses of an item worth trying again (the upstream's or the router's transient failures). */
const TRANSIENT = new Set([408, 409, 429, 500, 502, 503, 504]);
const ITEM_ATTEMPTS = 4;
/** Connections one chunk's line bookkeeping uses at once (each statement takes a millisecond or two). */
const LINE_CONNECTIONS = 2;

/** A line whose body the gateway cannot even copy (nested beyond the stack): it fails alone, nothing sent. */
const POISON = new ApiError(
  400,
  'The request could not be processed: its body is nested too deeply.',
  'invalid_request_error',
  'body',
  'invalid_request',
);

/**
 * A line whose request was in flight on a worker that died: it may have reached the provider, so it is not sent
 * again (no request runs, or is paid for upstream, twice); it is uncharged.
 */
const INTERRUPTED = new ApiError(
  500,
  'The worker running this request stopped before its answer arrived; it was not sent again, and nothing was charged.',
  'server_error',
  null,
  'request_interrupted',
);

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

  const slots = createBatchSlotActivities(deps);
  const acts: BatchActivities = {
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

    /** startBatch, then where the batch runs (./target.ts): one workflow task fewer ('batch-fewer-turns'). */
    async openBatch(a) {
      const s = await acts.startBatch(a);
      return { ...s, target: s.final || s.failure ? null : await createBatchTargetActivities(deps).nativeTarget(a) };
    },

    // The account's slot (./slotActivities.ts), given back once the chunk ran; a failed attempt keeps it to retry.
    async runChunkInSlot(a) {
      if (!(await slots.acquireBatchSlot(a)).granted) return null;
      const c = await acts.runChunk(a);
      await slots.releaseBatchSlot(a);
      return c;
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
      const inFlight = new Set<Promise<void>>();
      // Aborted when Temporal tells this attempt it is over (its heartbeat timed out and a twin runs the chunk, or
      // the worker shuts down): it then sends nothing more and commits nothing.
      const signal = ctx.cancellationSignal;
      // A request already sent is never cut short: it is answered and its outcome kept (batch_lines), so whichever
      // attempt commits the chunk reuses it rather than sending the line again.
      const uncut = new AbortController().signal;
      // Every line in flight follows it (and lets go when it ends): as many listeners as lines at once, not a leak.
      setMaxListeners(0, uncut);
      const claimant = `${ctx.info.attempt}:${randomBytes(6).toString('hex')}`;
      const staleMs = ctx.info.heartbeatTimeoutMs || settings.heartbeatMs;
      // The lines' bookkeeping (a claim and an outcome per line) takes at most a few of the worker's connections,
      // however fast the upstream answers: the other accounts' chunks and jobs sharing the pool find one free.
      const lineDb = gated(db, LINE_CONNECTIONS);
      let fault: unknown = null;

      // Heartbeats on a timer for the attempt's whole life (also while every slot is busy, while the pacer or a
      // cooldown holds requests back, while the last requests run), and keeps this attempt's claims fresh.
      let touching: Promise<void> | null = null;
      const beat = () => {
        ctx.heartbeat({ chunk: a.chunk, offset, done: completed + failed });
        touching ??= progress
          .touchLines(lineDb, a.batchId, claimant)
          .catch((e: unknown) => deps.logger?.warn({ err: (e as Error).message }, 'batch line claims not refreshed'))
          .finally(() => {
            touching = null;
          });
      };
      const timer = setInterval(beat, Math.max(50, Math.min(1000, staleMs / 4)));

      const count = (o: LineOutcome) => {
        if (o.ok) {
          completed++;
          outputs.push(o.outLine);
        } else {
          failed++;
          errors.push(o.outLine);
        }
        if (o.item) usages.push(o.item);
      };
      const refused = (usageId: string, customId: string, err: ApiError): LineOutcome => ({
        ok: false,
        outLine: outputLine(usageId, customId, { statusCode: err.status, body: openAIBody(err) }),
        item: null,
      });

      /**
       * The line's outcome when another attempt claimed it: its answer, once it has one, or lost with it (then what
       * it likely cost, `lostCost`, is the gateway's).
       */
      const settled = async (
        lineNo: number,
        usageId: string,
        customId: string,
        lostCost: GatewayCost | null,
      ): Promise<LineOutcome | null> => {
        for (;;) {
          const row = await progress.getLine(lineDb, a.batchId, lineNo, staleMs);
          if (!row) return null;
          if (row.state === 'done') return row;
          if (row.stale) {
            const lost = refused(usageId, customId, INTERRUPTED);
            if (await progress.settleStale(lineDb, a.batchId, lineNo, staleMs, lost, lostCost)) return lost;
            continue;
          }
          if (signal.aborted) return null;
          await new Promise((res) => setTimeout(res, 250));
        }
      };

      /** Runs one line: its outcome, or null when this attempt ended before sending it (it is unrun). */
      const runOne = async (l: Line): Promise<LineOutcome | null> => {
        // The upload's own check, again: a line that does not pass fails alone, before anything is sent.
        const r = parseRequestLine(l);
        if (isProblem(r)) {
          const id = itemUsageId(a.batchId, `line:${l.no}`);
          const message = r.message.slice(0, 500);
          return { ok: false, outLine: outputLine(id, `line:${l.no}`, null, { code: r.code, message }), item: null };
        }
        const usageId = itemUsageId(a.batchId, r.custom_id);
        // Each try gets its own copy of the body (the paths rename its model); a body that cannot be copied (nested
        // beyond the stack) is the line's fault and fails it alone.
        const copy = (): Record<string, unknown> | ApiError => {
          try {
            return structuredClone(r.body);
          } catch {
            return POISON;
          }
        };
        if (copy() === POISON) return refused(usageId, r.custom_id, POISON);
        // Interrupted (in flight on a dead worker), the line is the gateway's cost, estimated from its request.
        const lostCost = model
          ? interruptedLineCost({
              batchId: a.batchId,
              accountId: b.accountId,
              usageId,
              model,
              body: r.body,
              bodyBytes: l.bytes.length,
            })
          : null;
        let claim = await progress.claimLine(lineDb, a.batchId, l.no, claimant, staleMs, lostCost);
        while (claim !== true) {
          // Its chunk was committed by a twin meanwhile: its outcome is in that commit, which this attempt's finds.
          if (claim === null) return null;
          const o = claim.state === 'done' ? claim : await settled(l.no, usageId, r.custom_id, lostCost);
          if (o) return o;
          if (signal.aborted) return null;
          claim = await progress.claimLine(lineDb, a.batchId, l.no, claimant, staleMs, lostCost);
        }
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
          for (let tryNo = 1; ; tryNo++) {
            await waitForHealthy(deps, model, signal);
            if (!signal.aborted) await pacer.acquire(b.apiKeyId, signal).catch(() => undefined);
            if (signal.aborted) {
              // Ended before this try was sent: the line is unrun (the next attempt runs it), never a failed line.
              await progress.releaseLine(lineDb, a.batchId, l.no, claimant);
              return null;
            }
            const body = copy();
            o = await executeItem(deps, model, endpoint, body as Record<string, unknown>, operation, uncut, {
              accountId: b.accountId,
              apiKeyId: b.apiKeyId,
            });
            pacer.spent(b.apiKeyId, (o.units.prompt_tokens ?? 0) + (o.units.completion_tokens ?? 0));
            if (!TRANSIENT.has(o.statusCode) || o.internal || tryNo >= ITEM_ATTEMPTS) break;
            await new Promise((res) => setTimeout(res, Math.min(8000, 250 * 2 ** tryNo)));
          }
        }
        const outcome: LineOutcome = {
          ok: o.statusCode === 200,
          outLine: outputLine(usageId, r.custom_id, o),
          item: {
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
          },
        };
        if (await progress.finishLine(lineDb, a.batchId, l.no, claimant, outcome)) return outcome;
        // A successor took this line for lost meanwhile: its verdict is the one that counts.
        return settled(l.no, usageId, r.custom_id, lostCost);
      };

      const start = (l: Line) => {
        const p: Promise<void> = runOne(l)
          .then((o) => {
            if (o) count(o);
          })
          .catch((e: unknown) => {
            // The database or storage failed under this line: the attempt fails (after the lines in flight end)
            // and is retried; what was answered is kept.
            fault ??= e;
          })
          .finally(() => inFlight.delete(p));
        inFlight.add(p);
      };

      try {
        return await finish();
      } finally {
        clearInterval(timer);
        await touching;
      }

      async function finish(): Promise<ChunkOutcome> {
        try {
          beat();
          if (stream) {
            try {
              for await (const l of readLines(stream, a.offset, a.line)) {
                if (signal.aborted || fault) break;
                offset = l.end;
                line = l.no;
                if (isBlank(l.bytes)) continue;
                requests++;
                start(l);
                while (inFlight.size >= settings.concurrency) await Promise.race(inFlight);
                if (requests >= settings.chunkLines) break;
              }
            } finally {
              stream.destroy();
            }
          }
        } finally {
          // Whatever ended the reading, the lines in flight end before the attempt does (their claims stay fresh).
          await Promise.all(inFlight);
        }
        if (fault) throw fault;
        // Stopped after its batch was ended elsewhere (its workflow closed): the lines answered since are the
        // gateway's cost (nothing will charge them); the batch still open, whoever commits the chunk charges them.
        if (signal.aborted)
          await batches.recordAnsweredAfterEnd(
            db,
            { batchId: a.batchId, accountId: b.accountId, attempt: claimant },
            usages,
          );
        // Superseded or shut down: throw the cancellation, commit nothing (a later attempt commits the chunk).
        if (signal.aborted) await ctx.cancelled;
        if (requests === 0)
          return { chunk: a.chunk, offset, line, done: true, completed: 0, failed: 0, cancelRequested };
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
          { batchId: a.batchId, accountId: b.accountId, holdId: b.holdId, attempt: claimant },
          row,
          usages,
        );
        // The chunk is committed (by this attempt or a twin): its lines' progress rows have served.
        await progress.dropLines(lineDb, a.batchId, c.row.firstLine, c.row.firstLine + c.row.lines - 1);
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
      }
    },

    /** in_progress -> finalizing (every line has run). */
    async markFinalizing(a: BatchArgs): Promise<void> {
      await batches.transition(db, a.batchId, ['in_progress'], 'finalizing');
    },

    /** The output and error files, then the batch's end (./finalize.ts); a retry answers what was stored. */
    async finalizeBatch(a: FinalizeArgs): Promise<BatchJobResult> {
      const ctx = Context.current();
      if (a.status === 'completed') await acts.markFinalizing(a); // in_progress -> finalizing, if not yet
      const done = await finalizeBatch({ db, storage, staleMs: settings.heartbeatMs }, a, (p) => ctx.heartbeat(p));
      return { status: done.status };
    },
  };
  return acts;
}

export type { BatchActivities };
