import type Koa from 'koa';
import type Router from '@koa/router';
import type { Mount } from './mount';
import type { EmulatorControl } from './control';
import { hash, readJson, type Json } from './replyKit';
import { bounded, startRun, type BatchRun } from './batchRunner';
import { originOf } from './openaiBatches';

/**
 * Emulated Anthropic Message Batches under /anthropic/v1/messages/batches: POST (requests: [{custom_id, params}]),
 * GET (list, newest first, after_id / before_id / limit), GET /{id}, GET /{id}/results (JSONL, once ended),
 * POST /{id}/cancel, DELETE /{id} (once ended). Each request's params run through the emulator's own
 * /v1/messages (emulator/batchRunner.ts); results are `succeeded` with the message, `errored` with the error
 * response, `canceled` or `expired`. processing_status in_progress, canceling, ended; request_counts processing,
 * succeeded, errored, canceled, expired; results_url once ended.
 */

const CUSTOM_ID = /^[a-zA-Z0-9_-]{1,64}$/;
const MAX_REQUESTS = 100_000;

interface Batch {
  obj: Json;
  customIds: string[];
  run: BatchRun;
  /** Items errored before running (a params that asks to stream). */
  refused: Map<number, Json>;
}

const states = new WeakMap<EmulatorControl, Map<string, Batch>>();
function batchesOf(ctl: EmulatorControl): Map<string, Batch> {
  let s = states.get(ctl);
  if (!s) states.set(ctl, (s = new Map()));
  return s;
}

let seq = 0;
const iso = (ms: number) => new Date(ms).toISOString();

function err(ctx: Koa.Context, status: number, type: string, message: string): void {
  ctx.status = status;
  ctx.body = { type: 'error', error: { type, message }, request_id: `req_emu${hash(message)}` };
}

/** The result of item i in Anthropic's format. */
function resultOf(b: Batch, i: number): Json {
  const refused = b.refused.get(i);
  if (refused) return { type: 'errored', error: refused };
  const r = b.run.results[i];
  if (!r) return { type: b.run.end === 'expired' ? 'expired' : 'canceled' };
  if (r.status >= 200 && r.status < 300) return { type: 'succeeded', message: r.body };
  const body = r.body as Json;
  const error =
    body?.type === 'error'
      ? body
      : { type: 'error', error: { type: 'api_error', message: `status ${r.status}` }, request_id: null };
  return { type: 'errored', error };
}

/** The batch object as of now (counts and status follow the run). */
function view(b: Batch, origin: string): Json {
  const run = b.run;
  const counts = { processing: 0, succeeded: 0, errored: 0, canceled: 0, expired: 0 };
  for (let i = 0; i < run.items.length; i++) {
    if (!run.end && !b.refused.has(i) && run.results[i] === undefined) {
      counts.processing++;
      continue;
    }
    counts[resultOf(b, i).type as keyof typeof counts]++;
  }
  const o = b.obj;
  o.request_counts = counts;
  o.processing_status = run.end ? 'ended' : run.cancelRequestedAt !== null ? 'canceling' : 'in_progress';
  o.cancel_initiated_at = run.cancelRequestedAt !== null ? iso(run.cancelRequestedAt) : null;
  o.ended_at = run.endedAt !== null ? iso(run.endedAt) : null;
  o.results_url = run.end ? `${origin}/anthropic/v1/messages/batches/${o.id}/results` : null;
  return o;
}

function create(ctl: EmulatorControl, baseUrl: () => string) {
  return async (ctx: Koa.Context) => {
    const body = await readJson(ctx);
    ctl.record('POST', ctx.path, ctx.headers, body);
    if (!ctx.get('anthropic-version'))
      return err(ctx, 400, 'invalid_request_error', 'anthropic-version: header is required');
    if (!body) return err(ctx, 400, 'invalid_request_error', 'The request body is not valid JSON.');
    const reqs = body.requests;
    if (!Array.isArray(reqs) || reqs.length === 0)
      return err(ctx, 400, 'invalid_request_error', 'requests: Field required');
    if (reqs.length > MAX_REQUESTS)
      return err(ctx, 400, 'invalid_request_error', `requests: at most ${MAX_REQUESTS} requests per batch`);
    const seen = new Set<string>();
    for (let i = 0; i < reqs.length; i++) {
      const r = reqs[i];
      if (!r || typeof r !== 'object' || typeof r.custom_id !== 'string' || !CUSTOM_ID.test(r.custom_id))
        return err(ctx, 400, 'invalid_request_error', `requests.${i}.custom_id: String should match ${CUSTOM_ID}`);
      if (seen.has(r.custom_id))
        return err(ctx, 400, 'invalid_request_error', `requests.${i}.custom_id: duplicate custom_id ${r.custom_id}`);
      seen.add(r.custom_id);
      if (!r.params || typeof r.params !== 'object' || Array.isArray(r.params))
        return err(ctx, 400, 'invalid_request_error', `requests.${i}.params: Field required`);
    }
    const refused = new Map<number, Json>();
    reqs.forEach((r: Json, i: number) => {
      if (r.params.stream === true) {
        const message = 'stream: streaming is not supported in message batches';
        refused.set(i, { type: 'error', error: { type: 'invalid_request_error', message }, request_id: null });
      }
    });
    const now = Date.now();
    const id = `msgbatch_emu${hash(String(now) + ++seq + Math.random())}${seq.toString(36)}`;
    const items = reqs.map((r: Json, i: number) => ({
      path: '/anthropic/v1/messages',
      body: r.params,
      skip: refused.has(i),
    }));
    const headers: Record<string, string> = { 'anthropic-version': ctx.get('anthropic-version') };
    if (ctx.get('x-api-key')) headers['x-api-key'] = ctx.get('x-api-key');
    const obj: Json = {
      id,
      type: 'message_batch',
      processing_status: 'in_progress',
      request_counts: {},
      ended_at: null,
      created_at: iso(now),
      expires_at: iso(now + 24 * 3600_000),
      archived_at: null,
      cancel_initiated_at: null,
      results_url: null,
    };
    const run = startRun(ctl, originOf(ctx, baseUrl), items, headers, () => undefined);
    const b: Batch = { obj, customIds: reqs.map((r: Json) => r.custom_id), run, refused };
    bounded(batchesOf(ctl), id, b);
    ctx.body = view(b, originOf(ctx, baseUrl));
  };
}

export const mountAnthropicBatches: Mount = (router: Router, ctl: EmulatorControl, baseUrl: () => string) => {
  const p = '/anthropic/v1/messages/batches';
  const find = (ctx: Koa.Context): Batch | null => {
    const b = batchesOf(ctl).get(ctx.params.id);
    if (!b) err(ctx, 404, 'not_found_error', `No message batch found with id ${ctx.params.id}`);
    return b ?? null;
  };
  router.post(p, create(ctl, baseUrl));
  router.get(p, (ctx) => {
    const origin = originOf(ctx, baseUrl);
    const limit = Math.min(Math.max(Number(ctx.query.limit) || 20, 1), 1000);
    let all = [...batchesOf(ctl).values()].reverse(); // newest first
    const after = ctx.query.after_id;
    const before = ctx.query.before_id;
    let data: Batch[];
    let hasMore: boolean;
    if (typeof before === 'string') {
      const i = all.findIndex((b) => b.obj.id === before);
      all = i >= 0 ? all.slice(0, i) : [];
      data = all.slice(Math.max(0, all.length - limit));
      hasMore = all.length > limit;
    } else {
      if (typeof after === 'string') {
        const i = all.findIndex((b) => b.obj.id === after);
        all = i >= 0 ? all.slice(i + 1) : [];
      }
      data = all.slice(0, limit);
      hasMore = all.length > limit;
    }
    const out = data.map((b) => view(b, origin));
    ctx.body = {
      data: out,
      has_more: hasMore,
      first_id: out[0]?.id ?? null,
      last_id: out[out.length - 1]?.id ?? null,
    };
  });
  router.get(`${p}/:id`, (ctx) => {
    const b = find(ctx);
    if (b) ctx.body = view(b, originOf(ctx, baseUrl));
  });
  router.get(`${p}/:id/results`, (ctx) => {
    const b = find(ctx);
    if (!b) return;
    if (!b.run.end)
      return err(ctx, 400, 'invalid_request_error', `Message batch ${b.obj.id} has not finished processing.`);
    ctx.type = 'application/binary';
    ctx.body = b.customIds.map((custom_id, i) => JSON.stringify({ custom_id, result: resultOf(b, i) }) + '\n').join('');
  });
  router.post(`${p}/:id/cancel`, (ctx) => {
    ctl.record('POST', ctx.path, ctx.headers, null);
    const b = find(ctx);
    if (!b) return;
    if (b.run.end)
      return err(ctx, 400, 'invalid_request_error', `Message batch ${b.obj.id} has ended and cannot be canceled.`);
    b.run.cancelRequestedAt ??= Date.now();
    ctx.body = view(b, originOf(ctx, baseUrl));
  });
  router.delete(`${p}/:id`, (ctx) => {
    const b = find(ctx);
    if (!b) return;
    if (!b.run.end)
      return err(
        ctx,
        400,
        'invalid_request_error',
        `Message batch ${b.obj.id} cannot be deleted until it has ended; cancel it first.`,
      );
    batchesOf(ctl).delete(b.obj.id);
    ctx.body = { id: b.obj.id, type: 'message_batch_deleted' };
  });
};

/** Test hook: resolves when the emulated message batch has ended. */
export async function anthropicBatchEnded(ctl: EmulatorControl, id: string): Promise<void> {
  await batchesOf(ctl).get(id)?.run.done;
}
