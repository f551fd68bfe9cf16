import { ApiError, badRequest } from '../../errors';
import { anthropicBody } from '../../errorBodies';
import { clipJson } from '../../text';
import type { Batch } from './repo';
import type { Catalog } from '../../catalog';
import { lineLimitProblem } from './lineLimits';

/**
 * Anthropic's Message Batches over the gateway's batches (docs/batches.md): a message batch IS a batch whose
 * endpoint is /v1/messages, its requests written as the lines of an input file ({custom_id, method, url, body}),
 * run, held and charged by the same workflow. This module is the mapping both ways: a create request to input
 * lines, a batch to a `message_batch` object, an output or error line to a result.
 */

export const MESSAGES_ENDPOINT = '/v1/messages' as const;
export const MAX_MESSAGE_BATCH_REQUESTS = 100_000;
const CUSTOM_ID = /^[a-zA-Z0-9_-]{1,64}$/;

/** The JSONL lines of a create request's `requests`, and their one model. */
export function messageBatchLines(body: unknown, catalog: Catalog | null): { model: string; lines: string[] } {
  const reqs = (body as { requests?: unknown } | null)?.requests;
  if (!Array.isArray(reqs)) throw badRequest('requests: Field required', 'requests', 'missing_required_parameter');
  for (const k of Object.keys(body as object))
    if (k !== 'requests') throw badRequest(`${clipJson(k)}: Extra inputs are not permitted`, k, 'unknown_parameter');
  if (reqs.length === 0) throw badRequest('requests: List should have at least 1 item', 'requests');
  if (reqs.length > MAX_MESSAGE_BATCH_REQUESTS)
    throw badRequest(`requests: a message batch has at most ${MAX_MESSAGE_BATCH_REQUESTS} requests`, 'requests');
  const seen = new Set<string>();
  let model: string | null = null;
  const lines: string[] = [];
  reqs.forEach((r: unknown, i: number) => {
    const at = `requests.${i}`;
    if (!r || typeof r !== 'object' || Array.isArray(r)) throw badRequest(`${at}: Input should be an object`, at);
    const { custom_id: id, params, ...extra } = r as Record<string, unknown>;
    const k = Object.keys(extra)[0];
    if (k !== undefined) throw badRequest(`${at}.${clipJson(k)}: Extra inputs are not permitted`, `${at}.${k}`);
    if (typeof id !== 'string' || !CUSTOM_ID.test(id))
      throw badRequest(`${at}.custom_id: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'`, `${at}.custom_id`);
    if (seen.has(id)) throw badRequest(`${at}.custom_id: duplicate custom_id ${clipJson(id)}`, `${at}.custom_id`);
    seen.add(id);
    if (!params || typeof params !== 'object' || Array.isArray(params))
      throw badRequest(`${at}.params: Input should be an object`, `${at}.params`);
    const m = (params as { model?: unknown }).model;
    if (typeof m !== 'string' || !m) throw badRequest(`${at}.params.model: Field required`, `${at}.params.model`);
    if (model !== null && m !== model)
      throw badRequest(
        `${at}.params.model: ${clipJson(m)} differs from ${clipJson(model)}; a message batch here runs on one model.`,
        `${at}.params.model`,
        'mismatched_model',
      );
    model = m;
    if ((params as { stream?: unknown }).stream === true)
      throw badRequest(`${at}.params.stream: streaming is not supported in a message batch`, `${at}.params.stream`);
    // Each request is held to POST /v1/messages's limits now, not found out when it runs.
    const limit = lineLimitProblem(catalog, MESSAGES_ENDPOINT, id, params as Record<string, unknown>);
    if (limit) {
      const param =
        limit.param === 'custom_id'
          ? `${at}.custom_id`
          : limit.param && limit.param !== 'body'
            ? `${at}.params.${limit.param}`
            : `${at}.params`;
      throw badRequest(`${param}: ${limit.message}`, param, limit.code);
    }
    lines.push(JSON.stringify({ custom_id: id, method: 'POST', url: MESSAGES_ENDPOINT, body: params }));
  });
  return { model: model!, lines };
}

const iso = (d: Date | null) => (d ? d.toISOString() : null);
const OPEN = ['validating', 'in_progress', 'finalizing'];

/**
 * The batch as Anthropic's `message_batch` object. `ranFailed`: the requests that ran and failed (the chunks' count),
 * when the batch's own `failed` also counts requests an expired batch never ran.
 */
export function messageBatchView(b: Batch, resultsUrl: string, ranFailed = b.failed): Record<string, unknown> {
  const ended = !OPEN.includes(b.status) && b.status !== 'cancelling';
  const endedAt = b.completedAt ?? b.failedAt ?? b.expiredAt ?? b.cancelledAt;
  const unrun = Math.max(0, b.total - b.completed - ranFailed);
  // A failed batch ran none of what is left: Anthropic has no failed batch, so those requests are errored.
  const counts = {
    processing: ended ? 0 : unrun,
    succeeded: b.completed,
    errored: ranFailed + (b.status === 'failed' ? unrun : 0),
    canceled: b.status === 'cancelled' ? unrun : 0,
    expired: b.status === 'expired' ? unrun : 0,
  };
  return {
    id: b.id,
    type: 'message_batch',
    processing_status: ended ? 'ended' : b.status === 'cancelling' ? 'canceling' : 'in_progress',
    request_counts: counts,
    ended_at: ended ? iso(endedAt ?? b.createdAt) : null,
    created_at: iso(b.createdAt),
    expires_at: iso(b.expiresAt),
    archived_at: null,
    cancel_initiated_at: iso(b.cancellingAt),
    results_url: ended ? resultsUrl : null,
  };
}

export const isEnded = (b: Batch) => !OPEN.includes(b.status) && b.status !== 'cancelling';

interface OutputLine {
  custom_id?: unknown;
  response?: { status_code?: number; body?: unknown } | null;
  error?: { code?: string; message?: string } | null;
}

/** One result line of GET /v1/messages/batches/{id}/results from a line of the batch's output or error file. */
export function resultOf(line: OutputLine): { custom_id: string; result: Record<string, unknown> } {
  const customId = String(line.custom_id ?? '');
  const r = line.response;
  if (r && typeof r.status_code === 'number' && r.status_code >= 200 && r.status_code < 300)
    return { custom_id: customId, result: { type: 'succeeded', message: r.body } };
  if (!r && line.error?.code === 'batch_expired') return { custom_id: customId, result: { type: 'expired' } };
  if (!r && line.error?.code === 'batch_cancelled') return { custom_id: customId, result: { type: 'canceled' } };
  const status = r?.status_code ?? 400;
  const b = r?.body as { error?: { message?: unknown; code?: unknown } } | undefined;
  const message =
    typeof b?.error?.message === 'string' ? b.error.message : (line.error?.message ?? `HTTP ${String(status)}`);
  const code = typeof b?.error?.code === 'string' ? b.error.code : null;
  return {
    custom_id: customId,
    result: { type: 'errored', error: anthropicBody(new ApiError(status, message, undefined, null, code)) },
  };
}

/** The result of a request that never ran: its batch was cancelled, expired or failed. */
export function unrunResult(b: Batch, customId: string): { custom_id: string; result: Record<string, unknown> } {
  if (b.status === 'expired') return { custom_id: customId, result: { type: 'expired' } };
  if (b.status === 'cancelled') return { custom_id: customId, result: { type: 'canceled' } };
  const message = b.errors?.[0]?.message ?? 'The batch failed before this request ran.';
  return {
    custom_id: customId,
    result: { type: 'errored', error: anthropicBody(new ApiError(500, message, 'api_error', null, null)) },
  };
}
