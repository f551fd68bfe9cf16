import { Readable } from 'node:stream';
import { randomBytes } from 'node:crypto';
import { ApplicationFailure, Context } from '@temporalio/activity';
import { batchPricingOf, type ModelConfig, type Pricing } from '../../catalog';
import {
  tokensCost,
  tokensFromChars,
  estimatedUsage,
  fromAnthropicUsage,
  fromChatUsage,
  fromResponsesUsage,
  usageCost,
  usageUnits,
} from '../../billing';
import * as batches from './repo';
import { OPERATION_OF } from './endpoints';
import {
  nativeBatchApi,
  NativeApiError,
  type NativeBatchApi,
  type NativeResultLine,
  type NativeStatus,
} from '../../providers';
import { recordUpstream, upstreamOf } from './upstream';
import { createBatchTargetActivities } from './target';
import { isBlank, readLines, isProblem, parseRequestLine, type BatchEndpoint } from '../../files';
import type { BatchActivityDeps } from './activities';
import { itemUsageId, outputLine } from './activities';

/**
 * The activities of a batch that runs on its provider's own batch API (src/jobs/batches/workflow.ts, native branch):
 * submit the input there, read its status, cancel it, and collect its results: each result becomes an output or
 * error line in OpenAI's format and each succeeded one is charged at the model's batch price from the usage the
 * provider reported, chunk by chunk (batches.commitChunk: a chunk and its charges commit once, so a collection
 * retried after a worker died charges nothing twice). A request the provider's results leave out is listed as an
 * error, never lost.
 */

const UNRUN = ['batch_cancelled', 'batch_expired'];

export type BatchNativeActivities = ReturnType<typeof createBatchNativeActivities>;

export type { NativeTarget } from './target';

export function createBatchNativeActivities(deps: BatchActivityDeps) {
  const { db, storage, catalog, settings } = deps;

  async function load(batchId: string) {
    const b = await batches.getBatch(db, batchId);
    if (!b) throw ApplicationFailure.nonRetryable(`batch ${batchId} not found`, 'BatchNotFound');
    const model = catalog.get(b.model);
    const r = await db.query('SELECT storage_key, bytes FROM files WHERE id = $1', [b.inputFileId]);
    return { b, model, input: r.rows[0] as { storage_key: string; bytes: string } | undefined };
  }

  function apiOf(providerId: string): NativeBatchApi {
    const p = catalog.providers.get(providerId);
    if (!p) throw ApplicationFailure.nonRetryable(`provider ${providerId} is no longer in the catalog`, 'NoProvider');
    return nativeBatchApi(p);
  }

  /** A provider's refusal that a retry cannot change fails the activity for good (the batch then fails). */
  const permanent = (e: unknown) =>
    e instanceof NativeApiError && e.permanent ? ApplicationFailure.nonRetryable(e.message, 'NativeRefused') : e;

  return {
    // Where the batch runs (./target.ts), asked first by the workflow of every batch, native or routed.
    ...createBatchTargetActivities(deps),

    /**
     * The provider's batch this batch created: recorded on its row, else found there by the gateway's mark (a
     * submission whose answer was lost), then recorded. Null: none was created (or the API keeps no mark).
     */
    async findNative(a: { batchId: string; providerId: string }): Promise<{ nativeId: string | null }> {
      const had = await upstreamOf(db, a.batchId);
      if (had) return { nativeId: had.nativeId };
      const { b } = await load(a.batchId);
      const found = await apiOf(a.providerId).find(b.id, b.createdAt);
      if (!found) return { nativeId: null };
      return { nativeId: (await recordUpstream(db, b.id, { providerId: a.providerId, nativeId: found })).nativeId };
    },

    /** Sends every request of the input file (model renamed to the upstream's) to the provider's batch API. */
    async submitNative(a: { batchId: string; providerId: string }): Promise<{ nativeId: string }> {
      const { b, model, input } = await load(a.batchId);
      // Submitted before (a retried attempt, a continued run): the provider's batch is on the row, or carries our mark.
      const had = await upstreamOf(db, b.id);
      if (had) return { nativeId: had.nativeId };
      if (!model || !input) throw ApplicationFailure.nonRetryable('The batch input is no longer available.', 'Input');
      const api = apiOf(a.providerId);
      const found = await api.find(b.id, b.createdAt).catch((e: unknown) => {
        throw permanent(e);
      });
      if (found)
        return { nativeId: (await recordUpstream(db, b.id, { providerId: a.providerId, nativeId: found })).nativeId };
      const requests = [];
      for await (const l of readLines(await storage.get(input.storage_key))) {
        if (isBlank(l.bytes)) continue;
        const r = parseRequestLine(l);
        if (isProblem(r)) continue; // checked at upload; the collection lists it as an error
        requests.push({ customId: r.custom_id, body: { ...r.body, model: model.upstreamModel } });
      }
      let nativeId: string;
      try {
        nativeId = await api.submit(b.id, b.endpoint, requests);
      } catch (e) {
        throw permanent(e);
      }
      return { nativeId: (await recordUpstream(db, b.id, { providerId: a.providerId, nativeId })).nativeId };
    },

    async pollNative(a: { providerId: string; nativeId: string }): Promise<NativeStatus> {
      return apiOf(a.providerId)
        .status(a.nativeId)
        .catch((e: unknown) => {
          throw permanent(e);
        });
    },

    /** A refusal that a retry cannot change (the batch is gone there) leaves nothing to cancel. */
    async cancelNative(a: { providerId: string; nativeId: string }): Promise<void> {
      await apiOf(a.providerId)
        .cancel(a.nativeId)
        .catch((e: unknown) => {
          if (!(e instanceof NativeApiError && e.permanent)) throw e;
        });
    },

    /**
     * Turns the provider's results into output and error parts and charges, committed chunk by chunk; then lists the
     * requests the results left out. Returns the input position the batch ends at (every line accounted for).
     */
    async collectNative(a: {
      batchId: string;
      providerId: string;
      nativeId: string | null;
    }): Promise<{ offset: number; line: number }> {
      const ctx = Context.current();
      // Heartbeats for the whole attempt: a retry skipping committed chunks, or a slow read of the provider's files,
      // must not look like a dead worker (which would start yet another attempt, forever).
      const beat = setInterval(() => ctx.heartbeat(), heartbeatEvery(ctx.info.heartbeatTimeoutMs));
      try {
        return await collect(ctx, a);
      } finally {
        clearInterval(beat);
      }
    },
  };

  async function collect(
    ctx: Context,
    a: { batchId: string; providerId: string; nativeId: string | null },
  ): Promise<{ offset: number; line: number }> {
    const { b, model, input } = await load(a.batchId);
    const bytes = Number(input?.bytes ?? 0);
    const endpoint = b.endpoint as BatchEndpoint;
    const operation = OPERATION_OF[endpoint];
    const deployment = model ? (catalog.deployments(model)[0]?.id ?? null) : null;
    const seen = new Set<string>();
    let chunk = 0;
    let line = 0;
    let pending: NativeResultLine[] = [];
    // Each request's size, for the estimate of a result the provider reported no usage for.
    const requestBytes = new Map<string, number>();
    if (input)
      for await (const l of readLines(await storage.get(input.storage_key))) {
        if (isBlank(l.bytes)) continue;
        const r = parseRequestLine(l);
        if (!isProblem(r)) requestBytes.set(r.custom_id, Buffer.byteLength(JSON.stringify(r.body ?? {})));
      }

    const commit = async (results: NativeResultLine[]) => {
      const index = chunk++;
      const firstLine = line + 1;
      line += results.length;
      if (await batches.getChunk(db, a.batchId, index)) return; // committed by an earlier try
      const outputs: string[] = [];
      const errors: string[] = [];
      const usages: batches.ItemUsage[] = [];
      let unrun = 0;
      for (const r of results) {
        const usageId = itemUsageId(a.batchId, r.custom_id);
        const ok = r.response !== null && r.response.status_code >= 200 && r.response.status_code < 300;
        // Never run (the batch was cancelled or expired first): listed, but neither completed nor failed.
        if (!r.response && UNRUN.includes(r.error?.code ?? '')) unrun++;
        if (!ok) {
          errors.push(
            r.response
              ? outputLine(usageId, r.custom_id, { statusCode: r.response.status_code, body: r.response.body })
              : outputLine(usageId, r.custom_id, null, r.error ?? undefined),
          );
          continue;
        }
        outputs.push(outputLine(usageId, r.custom_id, { statusCode: r.response!.status_code, body: r.response!.body }));
        const billed = billOf(model, endpoint, r.response!.body, requestBytes.get(r.custom_id) ?? 0);
        usages.push({
          usage: {
            id: usageId,
            apiKeyId: b.apiKeyId,
            model: b.model,
            operation,
            units: billed.units,
            latencyMs: 0,
            status: 200,
            deployment,
            routing: null,
            pricing: billed.pricing,
          },
          cost: billed.cost,
        });
      }
      const part = async (lines: string[], kind: string) => {
        if (!lines.length) return null;
        const key = `batches/${a.batchId}/parts/${index}-${randomBytes(6).toString('hex')}.${kind}.jsonl`;
        await storage.put(key, Readable.from([Buffer.from(lines.join(''))]), 'application/jsonl');
        return key;
      };
      const row: batches.ChunkRow = {
        chunk: index,
        firstLine,
        lines: results.length,
        nextOffset: bytes,
        completed: outputs.length,
        failed: errors.length - unrun,
        costVnd: 0,
        outputKey: await part(outputs, 'output'),
        errorKey: await part(errors, 'error'),
      };
      // An attempt Temporal has given up on (it heartbeats in vain) commits nothing: its successor does.
      if (ctx.cancellationSignal.aborted) throw ctx.cancellationSignal.reason ?? new Error('superseded');
      const c = await batches.commitChunk(
        db,
        { batchId: a.batchId, accountId: b.accountId, holdId: b.holdId },
        row,
        usages,
      );
      if (!c.committed)
        for (const k of [row.outputKey, row.errorKey]) if (k) await storage.delete(k).catch(() => undefined);
      ctx.heartbeat({ chunk: index });
    };

    if (a.nativeId) {
      for await (const r of apiOf(a.providerId).results(a.nativeId)) {
        if (seen.has(r.custom_id)) continue;
        seen.add(r.custom_id);
        pending.push(r);
        if (pending.length >= settings.chunkLines) {
          await commit(pending);
          pending = [];
        }
      }
      if (pending.length) await commit(pending);
    }
    // Requests the provider's results do not name (or never submitted: a batch cancelled before it was sent).
    pending = [];
    if (input) {
      for await (const l of readLines(await storage.get(input.storage_key))) {
        if (isBlank(l.bytes)) continue;
        const r = parseRequestLine(l);
        const id = isProblem(r) ? `line:${l.no}` : r.custom_id;
        if (seen.has(id)) continue;
        seen.add(id);
        const error = a.nativeId
          ? { code: 'batch_result_missing', message: "The provider's batch results did not include this request." }
          : { code: 'batch_cancelled', message: 'This request was not executed because the batch was cancelled.' };
        pending.push({ custom_id: id, response: null, error });
        if (pending.length >= settings.chunkLines) {
          await commit(pending);
          pending = [];
        }
      }
    }
    if (pending.length) await commit(pending);
    return { offset: bytes, line };
  }
}

/** A third of the heartbeat timeout (at least every 100 ms; every 10 s when the attempt has none). */
function heartbeatEvery(timeoutMs: number | undefined): number {
  return Math.max(100, Math.floor((timeoutMs || 30_000) / 3));
}

/** The cost of one succeeded result at the model's batch prices, from the usage the provider reported. */
function billOf(
  model: ModelConfig | undefined,
  endpoint: BatchEndpoint,
  body: unknown,
  requestBytes: number,
): { cost: number; units: Record<string, number>; pricing: Pricing | null } {
  if (!model) return { cost: 0, units: {}, pricing: null };
  const prices = batchPricingOf(model);
  const u = (body as { usage?: Record<string, any> } | null)?.usage;
  if (endpoint === '/v1/embeddings') {
    // No usage reported: estimated from the request's size, as the synchronous path does, and marked so.
    if (!u || typeof u.prompt_tokens !== 'number') {
      const tokens = tokensFromChars(requestBytes);
      return { cost: tokensCost(prices, tokens), units: { prompt_tokens: tokens, estimated: 1 }, pricing: prices };
    }
    const tokens = Math.max(0, Math.ceil(Number(u.prompt_tokens) || 0));
    return { cost: tokensCost(prices, tokens), units: { prompt_tokens: tokens }, pricing: prices };
  }
  // No usage reported: input estimated from the request's size, output from the text delivered (the synchronous
  // path's rule), marked `estimated`.
  const usage = !u
    ? estimatedUsage(requestBytes, deliveredChars(endpoint, body))
    : endpoint === '/v1/messages'
      ? fromAnthropicUsage(u as Parameters<typeof fromAnthropicUsage>[0])
      : endpoint === '/v1/responses'
        ? fromResponsesUsage(u as Parameters<typeof fromResponsesUsage>[0])
        : fromChatUsage(u as Parameters<typeof fromChatUsage>[0]);
  return { cost: usageCost(prices, usage), units: usageUnits(usage), pricing: prices };
}

/** The characters of what a result delivered (its text, tool arguments and other content, as JSON). */
function deliveredChars(endpoint: BatchEndpoint, body: unknown): number {
  const b = (body ?? {}) as Record<string, unknown>;
  const part =
    endpoint === '/v1/messages'
      ? b.content
      : endpoint === '/v1/responses'
        ? b.output
        : Array.isArray(b.choices)
          ? (b.choices as Record<string, any>[]).map((c) => c.message ?? c.text ?? null)
          : body;
  return JSON.stringify(part ?? '').length;
}
