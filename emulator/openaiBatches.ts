import type Koa from 'koa';
import type Router from '@koa/router';
import type { Mount } from './mount';
import type { EmulatorControl } from './control';
import { readForm } from './openai';
import { hash, readJson, type Json } from './replyKit';
import { bounded, startRun, type BatchRun, type ItemResult } from './batchRunner';

/**
 * Emulated OpenAI Files and Batch API under /openai/v1: POST /files (multipart: file, purpose), GET /files,
 * GET /files/{id}, GET /files/{id}/content, DELETE /files/{id}; POST /batches, GET /batches (cursor `after`),
 * GET /batches/{id}, POST /batches/{id}/cancel. A batch validates its input file as OpenAI does (JSONL, custom_id,
 * method POST, url equal to the batch's endpoint, one model), then runs its lines through the emulator's own
 * endpoints (emulator/batchRunner.ts) and writes its output and error files in OpenAI's line format. Statuses:
 * validating, failed, in_progress, finalizing, completed, expired, cancelling, cancelled.
 */

const ENDPOINTS = ['/v1/chat/completions', '/v1/embeddings', '/v1/completions', '/v1/responses'];
const PURPOSES = ['assistants', 'batch', 'batch_output', 'fine-tune', 'vision', 'user_data', 'evals'];
const MAX_LINES = 50_000;

interface StoredFile {
  obj: Json;
  data: Buffer;
}
interface LineError {
  code: string;
  message: string;
  param: string | null;
  line: number | null;
}
interface Batch {
  obj: Json;
  customIds: string[];
  run: BatchRun | null;
}
interface State {
  files: Map<string, StoredFile>;
  batches: Map<string, Batch>;
}

const states = new WeakMap<EmulatorControl, State>();
function stateOf(ctl: EmulatorControl): State {
  let s = states.get(ctl);
  if (!s) states.set(ctl, (s = { files: new Map(), batches: new Map() }));
  return s;
}

let seq = 0;
const nowSec = () => Math.floor(Date.now() / 1000);
const newId = (prefix: string) => `${prefix}${hash(String(Date.now()) + ++seq + Math.random())}${seq.toString(36)}`;

function fail(ctx: Koa.Context, status: number, message: string, param: string | null, code: string | null): void {
  ctx.status = status;
  ctx.body = { error: { message, type: 'invalid_request_error', param, code } };
}

/** The emulator's origin plus the `/_d/<deployment>` prefix the request came in on. */
export function originOf(ctx: Koa.Context, baseUrl: () => string): string {
  const d = ctx.req.headers['x-emulator-deployment'];
  return typeof d === 'string' ? `${baseUrl()}/_d/${d}` : baseUrl();
}

function storeFile(st: State, data: Buffer, filename: string, purpose: string): Json {
  const obj = {
    id: newId('file-emu'),
    object: 'file',
    bytes: data.length,
    created_at: nowSec(),
    expires_at: null,
    filename,
    purpose,
    status: 'processed',
    status_details: null,
  };
  bounded(st.files, obj.id, { obj, data });
  return obj;
}

/** Cursor page of newest-first objects (`after`: an id of the previous page's last object). */
function page(all: Json[], query: Json): Json {
  const limit = Math.min(Math.max(Number(query.limit) || 20, 1), 10_000);
  let list = all.sort((a, b) => b.created_at - a.created_at || (a.id < b.id ? 1 : -1));
  if (typeof query.after === 'string') {
    const i = list.findIndex((o) => o.id === query.after);
    list = i >= 0 ? list.slice(i + 1) : [];
  }
  const data = list.slice(0, limit);
  return {
    object: 'list',
    data,
    first_id: data[0]?.id ?? null,
    last_id: data[data.length - 1]?.id ?? null,
    has_more: list.length > limit,
  };
}

/** The input file's lines, or the errors OpenAI reports for it (each naming its 1-based line). */
function parseInput(data: Buffer, endpoint: string): { lines: Json[]; errors: LineError[] } {
  const lines: Json[] = [];
  const errors: LineError[] = [];
  const seen = new Set<string>();
  let model: string | null = null;
  const texts = data.toString('utf8').split('\n');
  for (let n = 0; n < texts.length; n++) {
    const t = texts[n].trim();
    if (!t) continue;
    const line = n + 1;
    let o: Json;
    try {
      o = JSON.parse(t);
    } catch {
      errors.push({
        code: 'invalid_json_line',
        message: 'This line is not parseable as valid JSON.',
        param: null,
        line,
      });
      continue;
    }
    if (!o || typeof o !== 'object' || typeof o.custom_id !== 'string' || !o.custom_id) {
      errors.push({ code: 'missing_required_parameter', message: 'Missing custom_id.', param: 'custom_id', line });
      continue;
    }
    if (seen.has(o.custom_id)) {
      const message = `The custom_id '${o.custom_id}' is not unique within the input file.`;
      errors.push({ code: 'duplicate_custom_id', message, param: 'custom_id', line });
      continue;
    }
    seen.add(o.custom_id);
    if (o.method !== 'POST') {
      errors.push({ code: 'invalid_value', message: "The method must be 'POST'.", param: 'method', line });
      continue;
    }
    if (o.url !== endpoint) {
      const message = `The url '${String(o.url)}' does not match the batch's endpoint '${endpoint}'.`;
      errors.push({ code: 'invalid_url', message, param: 'url', line });
      continue;
    }
    if (!o.body || typeof o.body !== 'object' || Array.isArray(o.body)) {
      errors.push({ code: 'invalid_value', message: 'The body must be an object.', param: 'body', line });
      continue;
    }
    const m = String(o.body.model ?? '');
    if (model !== null && m !== model) {
      const message = 'All requests in a batch must use the same model.';
      errors.push({ code: 'mismatched_model', message, param: 'body.model', line });
      continue;
    }
    model = m;
    lines.push(o);
  }
  if (!errors.length && lines.length === 0)
    errors.push({ code: 'empty_file', message: 'The input file has no requests.', param: null, line: null });
  if (lines.length > MAX_LINES) {
    const message = `The input file has ${lines.length} requests; the limit is ${MAX_LINES}.`;
    errors.push({ code: 'too_many_requests', message, param: null, line: null });
  }
  return { lines, errors };
}

/** One output or error file line in OpenAI's format. */
function outputLine(customId: string, i: number, r: ItemResult | undefined, end: string): string {
  const id = `batch_req_${hash(customId + i)}${i.toString(36)}`;
  if (!r) {
    const error =
      end === 'expired'
        ? { code: 'batch_expired', message: 'This request could not be executed before the completion window expired.' }
        : { code: 'batch_cancelled', message: 'This request was not executed because the batch was cancelled.' };
    return JSON.stringify({ id, custom_id: customId, response: null, error });
  }
  return JSON.stringify({
    id,
    custom_id: customId,
    response: { status_code: r.status, request_id: r.requestId, body: r.body },
    error: null,
  });
}

function finish(st: State, b: Batch, run: BatchRun): void {
  const end = run.end!;
  const now = () => nowSec();
  if (end === 'completed') b.obj.finalizing_at = now();
  const out: string[] = [];
  const err: string[] = [];
  const usage = { input: 0, output: 0, cached: 0, reasoning: 0 };
  run.results.forEach((r, i) => {
    const ok = r !== undefined && r.status >= 200 && r.status < 300;
    (ok ? out : err).push(outputLine(b.customIds[i], i, r, end));
    if (!ok) return;
    const u = (r.body as Json)?.usage ?? {};
    usage.input += u.prompt_tokens ?? u.input_tokens ?? 0;
    usage.output += u.completion_tokens ?? u.output_tokens ?? 0;
    usage.cached += u.prompt_tokens_details?.cached_tokens ?? u.input_tokens_details?.cached_tokens ?? 0;
    usage.reasoning += u.completion_tokens_details?.reasoning_tokens ?? u.output_tokens_details?.reasoning_tokens ?? 0;
  });
  b.obj.request_counts = {
    total: run.items.length,
    completed: out.length,
    failed: run.results.filter((r) => r !== undefined).length - out.length,
  };
  b.obj.usage = {
    input_tokens: usage.input,
    input_tokens_details: { cached_tokens: usage.cached },
    output_tokens: usage.output,
    output_tokens_details: { reasoning_tokens: usage.reasoning },
    total_tokens: usage.input + usage.output,
  };
  const write = (lines: string[], kind: string) =>
    storeFile(st, Buffer.from(lines.map((l) => l + '\n').join('')), `${b.obj.id}_${kind}.jsonl`, 'batch_output').id;
  if (out.length) b.obj.output_file_id = write(out, 'output');
  if (err.length) b.obj.error_file_id = write(err, 'error');
  b.obj.status = end;
  b.obj[`${end}_at`] = now();
}

/** Progress counts while the batch runs. */
function refreshCounts(b: Batch): void {
  const run = b.run;
  if (!run || run.end) return;
  const done = run.results.filter((r) => r !== undefined);
  const completed = done.filter((r) => r!.status >= 200 && r!.status < 300).length;
  b.obj.request_counts = { total: run.items.length, completed, failed: done.length - completed };
}

function createBatch(ctl: EmulatorControl, baseUrl: () => string) {
  return async (ctx: Koa.Context) => {
    const body = await readJson(ctx);
    ctl.record('POST', ctx.path, ctx.headers, body);
    if (!body) return fail(ctx, 400, 'We could not parse the JSON body of your request.', null, 'invalid_json');
    const st = stateOf(ctl);
    if (!ENDPOINTS.includes(body.endpoint))
      return fail(ctx, 400, `Invalid value for 'endpoint': ${JSON.stringify(body.endpoint)}.`, 'endpoint', null);
    if (body.completion_window !== '24h')
      return fail(
        ctx,
        400,
        "Invalid value for 'completion_window': only '24h' is supported.",
        'completion_window',
        null,
      );
    const file = typeof body.input_file_id === 'string' ? st.files.get(body.input_file_id) : undefined;
    if (!file) return fail(ctx, 404, `No such File object: ${String(body.input_file_id)}`, 'input_file_id', null);
    if (file.obj.purpose !== 'batch')
      return fail(ctx, 400, "The input file must have purpose 'batch'.", 'input_file_id', 'invalid_file_purpose');
    const created = nowSec();
    const obj: Json = {
      id: newId('batch_emu'),
      object: 'batch',
      endpoint: body.endpoint,
      model: null,
      errors: null,
      input_file_id: file.obj.id,
      completion_window: '24h',
      status: 'validating',
      output_file_id: null,
      error_file_id: null,
      created_at: created,
      in_progress_at: null,
      expires_at: created + 24 * 3600,
      finalizing_at: null,
      completed_at: null,
      failed_at: null,
      expired_at: null,
      cancelling_at: null,
      cancelled_at: null,
      request_counts: { total: 0, completed: 0, failed: 0 },
      metadata: body.metadata ?? null,
    };
    const b: Batch = { obj, customIds: [], run: null };
    bounded(st.batches, obj.id, b);
    const { lines, errors } = parseInput(file.data, body.endpoint);
    if (errors.length) {
      obj.status = 'failed';
      obj.failed_at = created;
      obj.errors = { object: 'list', data: errors };
    } else {
      obj.model = lines[0].body.model ?? null;
      obj.status = 'in_progress';
      obj.in_progress_at = created;
      obj.request_counts.total = lines.length;
      b.customIds = lines.map((l) => l.custom_id);
      const items = lines.map((l) => ({ path: '/openai' + String(l.url), body: l.body }));
      const auth = ctx.get('authorization');
      b.run = startRun(ctl, originOf(ctx, baseUrl), items, auth ? { authorization: auth } : {}, (run) =>
        finish(st, b, run),
      );
    }
    ctx.body = obj;
  };
}

export const mountOpenAIBatches: Mount = (router: Router, ctl: EmulatorControl, baseUrl: () => string) => {
  const p = '/openai/v1';
  router.post(`${p}/files`, async (ctx) => {
    const form = await readForm(ctx);
    ctl.record('POST', ctx.path, ctx.headers, form ? { purpose: form.get('purpose') } : null);
    if (!form) return fail(ctx, 400, 'Malformed multipart body.', null, 'invalid_multipart');
    const file = form.get('file');
    const purpose = form.get('purpose');
    if (!file || typeof file === 'string')
      return fail(ctx, 400, "Missing required parameter: 'file'.", 'file', 'missing_required_parameter');
    if (typeof purpose !== 'string' || !PURPOSES.includes(purpose))
      return fail(ctx, 400, `Invalid value for 'purpose': ${JSON.stringify(purpose)}.`, 'purpose', 'invalid_value');
    ctx.body = storeFile(stateOf(ctl), Buffer.from(await file.arrayBuffer()), file.name || 'upload', purpose);
  });
  router.get(`${p}/files`, (ctx) => {
    const all = [...stateOf(ctl).files.values()].map((f) => f.obj);
    const purpose = ctx.query.purpose;
    ctx.body = page(typeof purpose === 'string' ? all.filter((f) => f.purpose === purpose) : all, ctx.query);
  });
  router.get(`${p}/files/:id`, (ctx) => {
    const f = stateOf(ctl).files.get(ctx.params.id);
    if (!f) return fail(ctx, 404, `No such File object: ${ctx.params.id}`, 'id', null);
    ctx.body = f.obj;
  });
  router.get(`${p}/files/:id/content`, (ctx) => {
    const f = stateOf(ctl).files.get(ctx.params.id);
    if (!f) return fail(ctx, 404, `No such File object: ${ctx.params.id}`, 'id', null);
    ctx.type = 'application/octet-stream';
    ctx.body = f.data;
  });
  router.delete(`${p}/files/:id`, (ctx) => {
    const st = stateOf(ctl);
    if (!st.files.delete(ctx.params.id)) return fail(ctx, 404, `No such File object: ${ctx.params.id}`, 'id', null);
    ctx.body = { id: ctx.params.id, object: 'file', deleted: true };
  });
  router.post(`${p}/batches`, createBatch(ctl, baseUrl));
  router.get(`${p}/batches`, (ctx) => {
    const st = stateOf(ctl);
    for (const b of st.batches.values()) refreshCounts(b);
    ctx.body = page(
      [...st.batches.values()].map((b) => b.obj),
      ctx.query,
    );
  });
  router.get(`${p}/batches/:id`, (ctx) => {
    const b = stateOf(ctl).batches.get(ctx.params.id);
    if (!b) return fail(ctx, 404, `No batch found with id '${ctx.params.id}'.`, null, null);
    refreshCounts(b);
    ctx.body = b.obj;
  });
  router.post(`${p}/batches/:id/cancel`, (ctx) => {
    ctl.record('POST', ctx.path, ctx.headers, null);
    const b = stateOf(ctl).batches.get(ctx.params.id);
    if (!b) return fail(ctx, 404, `No batch found with id '${ctx.params.id}'.`, null, null);
    if (b.obj.status === 'cancelling' || b.obj.status === 'cancelled') return void (ctx.body = b.obj);
    if (!b.run || b.run.end)
      return fail(ctx, 400, `Cannot cancel a batch with status '${b.obj.status}'.`, null, 'invalid_state');
    b.run.cancelRequestedAt = Date.now();
    b.obj.status = 'cancelling';
    b.obj.cancelling_at = nowSec();
    refreshCounts(b);
    ctx.body = b.obj;
  });
};

/** Test hook: resolves when the emulated batch has ended (immediately for an unknown or failed one). */
export async function openaiBatchEnded(ctl: EmulatorControl, id: string): Promise<void> {
  await stateOf(ctl).batches.get(id)?.run?.done;
}
