import type { Span } from '@opentelemetry/api';
import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import type { AppDeps } from '../../operations';
import { ApiError, badRequest, budgetExceeded, conflict, insufficientFunds, notFound } from '../../errors';
import { InsufficientFunds, BudgetExceeded } from '../../billing';
import { BATCH_ENDPOINTS, type BatchEndpoint, getFileForAccount } from '../../files';
import { isTemporalError } from '../temporalErrors';
import { clip, clipJson } from '../../text';
import { isUnstorableText, unstorableTextMessage } from '../../db';
import { batchBound } from './bound';
import { ENDPOINT_MODES } from './endpoints';
import * as repo from './repo';
import { startBatchWorkflow } from './start';

/**
 * Creating and cancelling batches (POST /v1/batches, POST /v1/batches/{id}/cancel): validate, bound the cost over
 * the input file, hold it with the batch row, start the workflow (or release and fail when it cannot start).
 */

export type BatchServiceDeps = Pick<
  AppDeps,
  'db' | 'storage' | 'catalog' | 'router' | 'temporal' | 'config' | 'logger' | 'metrics'
>;

export interface CreateBatchBody {
  input_file_id: string;
  endpoint: BatchEndpoint;
  completion_window: '24h';
  metadata: Record<string, string> | null;
}

const FIELDS = ['input_file_id', 'endpoint', 'completion_window', 'metadata', 'output_expires_after'];

export function parseCreateBody(body: unknown): CreateBatchBody {
  if (body === null || typeof body !== 'object' || Array.isArray(body))
    throw badRequest('The body must be a JSON object.');
  const b = body as Record<string, unknown>;
  for (const k of Object.keys(b))
    if (!FIELDS.includes(k)) throw badRequest(`Unknown parameter: '${clip(k)}'.`, k, 'unknown_parameter');
  for (const k of ['input_file_id', 'endpoint', 'completion_window'])
    if (b[k] === undefined || b[k] === null)
      throw badRequest(`Missing required parameter: '${k}'.`, k, 'missing_required_parameter');
  if (typeof b.input_file_id !== 'string')
    throw badRequest("Invalid 'input_file_id': a file id string.", 'input_file_id');
  if (typeof b.endpoint !== 'string' || !(BATCH_ENDPOINTS as readonly string[]).includes(b.endpoint))
    throw badRequest(
      `Invalid 'endpoint' ${clipJson(b.endpoint)}: use one of ${BATCH_ENDPOINTS.join(', ')}.`,
      'endpoint',
    );
  if (b.completion_window !== '24h')
    throw badRequest(
      `Invalid 'completion_window' ${clipJson(b.completion_window)}: only "24h" is supported.`,
      'completion_window',
    );
  let metadata: Record<string, string> | null = null;
  if (b.metadata !== undefined && b.metadata !== null) {
    const m = b.metadata;
    if (typeof m !== 'object' || Array.isArray(m))
      throw badRequest("Invalid 'metadata': an object of strings.", 'metadata');
    const entries = Object.entries(m as Record<string, unknown>);
    if (entries.length > 16) throw badRequest("Invalid 'metadata': at most 16 keys.", 'metadata');
    for (const [k, v] of entries) {
      if (k.length > 64)
        throw badRequest(`Invalid 'metadata': key ${clipJson(k)} is longer than 64 characters.`, 'metadata');
      if (typeof v !== 'string' || v.length > 512)
        throw badRequest(`Invalid 'metadata.${clip(k)}': a string of at most 512 characters.`, `metadata.${clip(k)}`);
      // Stored as jsonb, which holds neither NUL nor an unpaired surrogate: the client's error, not a 500.
      if (isUnstorableText(k)) throw badRequest(unstorableTextMessage('metadata'), 'metadata');
      if (isUnstorableText(v)) throw badRequest(unstorableTextMessage(`metadata.${k}`), `metadata.${clip(k)}`);
    }
    metadata = Object.fromEntries(entries) as Record<string, string>;
  }
  if (b.output_expires_after !== undefined && b.output_expires_after !== null) {
    const o = b.output_expires_after as { anchor?: unknown; seconds?: unknown };
    if (typeof o !== 'object' || o.anchor !== 'created_at' || typeof o.seconds !== 'number')
      throw badRequest('Invalid \'output_expires_after\': {anchor: "created_at", seconds}.', 'output_expires_after');
  }
  return { input_file_id: b.input_file_id, endpoint: b.endpoint as BatchEndpoint, completion_window: '24h', metadata };
}

export function batchesClient(deps: Pick<BatchServiceDeps, 'temporal' | 'config'>): Client {
  if (!deps.temporal) {
    const why =
      deps.config.temporalAddress === 'off'
        ? 'this API process serves synchronous operations only (TEMPORAL_ADDRESS=off)'
        : 'the job scheduler (Temporal) is not connected';
    throw new ApiError(503, `Batches are unavailable: ${why}.`, 'server_error', null, 'batches_unavailable');
  }
  return deps.temporal;
}

export async function createBatch(
  deps: BatchServiceDeps,
  who: { accountId: string; apiKeyId: string | null },
  body: CreateBatchBody,
  onModel: (model: string) => void,
  /** The request's span while tracing is on: the batch's workflow continues its trace. */
  trace?: Span,
): Promise<repo.Batch> {
  const client = batchesClient(deps);
  const file = await getFileForAccount(deps.db, who.accountId, body.input_file_id);
  if (!file) throw notFound(`No such File object: ${clip(body.input_file_id)}`, 'file_not_found', 'input_file_id');
  if (file.purpose !== 'batch' || !file.model || !file.endpoint)
    throw badRequest(`The file ${file.id} is not a batch input file (purpose 'batch').`, 'input_file_id');
  if (file.endpoint !== body.endpoint)
    throw badRequest(
      `The requests in ${file.id} are for ${file.endpoint}, not ${body.endpoint}.`,
      'endpoint',
      'mismatched_endpoint',
    );
  const model = deps.catalog.require(file.model, ENDPOINT_MODES[body.endpoint]);
  onModel(model.id);
  const bound = await batchBound(
    deps.catalog,
    deps.router,
    model,
    body.endpoint,
    await deps.storage.get(file.storageKey),
  );
  const id = repo.newBatchId();
  let batch: repo.Batch;
  try {
    batch = await repo.createBatchWithHold(deps.db, {
      id,
      accountId: who.accountId,
      apiKeyId: who.apiKeyId,
      endpoint: body.endpoint,
      model: model.id,
      inputFileId: file.id,
      completionWindow: body.completion_window,
      metadata: body.metadata,
      total: bound.requests,
      maxCostVnd: bound.maxCost,
      holdId: randomUUID(),
      expiresAt: new Date(Date.now() + deps.config.batches.completionWindowMs),
    });
  } catch (e) {
    if (e instanceof InsufficientFunds) throw insufficientFunds(e.needed, e.available);
    if (e instanceof BudgetExceeded) {
      deps.metrics.limitRefusals.inc({ limit: 'budget' });
      throw budgetExceeded(e.needed, e.room, e.period);
    }
    throw e;
  }
  try {
    await startBatchWorkflow(client, deps.config, batch, trace);
  } catch (e) {
    deps.logger.error({ batchId: id, err: (e as Error).message }, 'could not start batch workflow');
    await repo.finishBatch(deps.db, {
      batchId: id,
      holdId: batch.holdId,
      status: 'failed',
      outputFileId: null,
      errorFileId: null,
      errors: [
        {
          code: 'scheduling_failed',
          message: 'The batch could not be scheduled; nothing was charged.',
          param: null,
          line: null,
        },
      ],
    });
    throw new ApiError(
      503,
      'The batch could not be scheduled; nothing was charged. Please retry.',
      'server_error',
      null,
      'batches_unavailable',
    );
  }
  void repo
    .markWorkflowStarted(deps.db, id)
    .catch((e) => deps.logger.warn({ batchId: id, err: (e as Error).message }, 'could not record workflow start'));
  return batch;
}

/**
 * Cancels a batch that has not ended: `cancelling` at once, then the workflow lets the chunk in flight finish
 * (its items charged), releases the rest and ends `cancelled`. Waits a moment for that, so the answer usually
 * shows the final status.
 */
export async function cancelBatch(deps: BatchServiceDeps, b: repo.Batch): Promise<repo.Batch> {
  if (repo.isFinal(b.status) || b.status === 'finalizing')
    throw conflict(`Cannot cancel a batch with status '${b.status}'.`, 'batch_not_cancellable');
  await repo.markCancelling(deps.db, b.id);
  try {
    await batchesClient(deps).workflow.getHandle(b.workflowId).signal('cancel');
  } catch (e) {
    if (!isTemporalError(e, 'WorkflowNotFoundError')) throw e;
  }
  const until = Date.now() + deps.config.batches.cancelWaitMs;
  let now = (await repo.getBatch(deps.db, b.id)) ?? b;
  while (Date.now() < until && !repo.isFinal(now.status)) {
    await new Promise((res) => setTimeout(res, 100));
    now = (await repo.getBatch(deps.db, b.id)) ?? now;
  }
  return now;
}
