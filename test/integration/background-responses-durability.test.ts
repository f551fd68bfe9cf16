import OpenAI from 'openai';
import { getBalance, verifyProjections } from '../../src/billing/ledger';
import { runAdmin } from '../../src/cli/admin';
import { startWorker } from '../../src/worker';
import {
  eventually,
  fastBackgroundSettings,
  spawnApi,
  spawnWorker,
  startVideoHarness,
  type ChildWorker,
  type VideoHarness,
} from '../support/video';
import { workflowCodePath } from '../support/workflowCode';
import { verifyBackgroundResponses } from '../../src/jobs/backgroundResponses/verify';
import { reconcileBackgroundResponses } from '../../src/jobs/backgroundResponses/reconciler';
import { workflowState } from '../../src/jobs/workflowState';
import { priceVersionAt, schedulePriceChange } from '../../src/billing/priceBook';
import { usageCost } from '../../src/billing/tokenUsage';
import { fromResponsesUsage } from '../../src/billing/tokenUsage';

/**
 * A background response outlives its client, its API process and its worker: POSTed with stream: true to an API
 * process that is SIGKILLed as soon as the stream began, run by a worker process SIGKILLed mid-answer (events
 * stored, the upstream still streaming). Another worker retries the run; the response completes; a client that
 * comes back reads it and resumes its whole stream, in order, each sequence number once. Money: one usage record,
 * charged once, the hold closed, projections true; the lost attempt is recorded as the gateway's cost, and
 * `verify-ledger` says so (and reports a lost attempt left without its cost record, or a charge that is not the
 * stored attempt's bill).
 */

let h: VideoHarness;
beforeAll(async () => {
  h = await startVideoHarness(
    {},
    {
      backgroundResponses: fastBackgroundSettings(),
    },
    { worker: false },
  );
}, 120_000);
afterAll(() => h?.close());

const MODELS = ['gpt-5-codex', 'gpt-4o-mini'];

test.each(MODELS)(
  '%s: API and worker SIGKILLed mid-answer, the response completes and resumes whole',
  async (model) => {
    const BAL = 5_000_000;
    const acc = await h.account(BAL);
    const since = new Date(Date.now() - 1000).toISOString();
    h.emulator.control.settings.chunkDelayMs = 60;
    const worker = await spawnWorker(h);
    const api = await spawnApi(h);
    let id: string;
    try {
      const viaChild = new OpenAI({ apiKey: acc.key, baseURL: `${api.url}/v1`, maxRetries: 0 });
      const input = Array.from({ length: 40 }, (_, i) => `word${i}`).join(' ');
      const stream = await viaChild.responses.create({ model, input, background: true, stream: true });
      const first = await stream[Symbol.asyncIterator]().next();
      id = (first.value as { response: { id: string } }).response.id;
      stream.controller.abort(); // the client goes away...
      await api.kill('SIGKILL'); // ...and so does its API process
      // The worker dies mid-answer: some events stored, not the last.
      await eventually(async () => {
        const n = await h.deps.db.query(
          'SELECT count(*)::int AS n FROM background_response_events WHERE response_id = $1',
          [id],
        );
        return n.rows[0].n >= 5;
      });
      await worker.kill('SIGKILL');
    } finally {
      await api.kill('SIGKILL').catch(() => undefined);
      await worker.kill('SIGKILL').catch(() => undefined);
    }
    const mid = await h.deps.db.query('SELECT status FROM background_responses WHERE id = $1', [id]);
    expect(mid.rows[0].status).toBe('in_progress');
    await h.startWorker();
    try {
      const c = new OpenAI({ apiKey: acc.key, baseURL: `${h.url}/v1`, maxRetries: 0 });
      const done = await eventually(async () => {
        const r = await c.responses.retrieve(id);
        return r.status === 'completed' ? r : null;
      });
      const events: OpenAI.Responses.ResponseStreamEvent[] = [];
      for await (const e of await c.responses.retrieve(id, { stream: true })) events.push(e);
      expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
      expect(events[0].type).toBe('response.created');
      expect(events.filter((e) => e.type === 'response.completed')).toHaveLength(1);
      const text = events
        .filter((e): e is OpenAI.Responses.ResponseTextDeltaEvent => e.type === 'response.output_text.delta')
        .map((e) => e.delta)
        .join('');
      expect(text).toBe(done.output_text);

      // Money: one usage record for the response, charged once; nothing held; the ledger reconciles.
      const row = (await h.deps.db.query('SELECT * FROM background_responses WHERE id = $1', [id])).rows[0];
      const usage = await h.deps.db.query('SELECT id, cost_vnd FROM usage_records WHERE account_id = $1', [
        acc.accountId,
      ]);
      expect(usage.rows).toHaveLength(1);
      expect(usage.rows[0]).toMatchObject({ id: row.usage_id, cost_vnd: row.cost_vnd });
      expect(row.cost_vnd).toBeGreaterThan(0);
      expect(await getBalance(h.deps.db, acc.accountId)).toMatchObject({ balance: BAL - row.cost_vnd, held: 0 });
      expect(await verifyProjections(h.deps.db)).toEqual([]);
      // The killed worker's attempt is the gateway's cost, never the customer's.
      const attempts = await h.deps.db.query(
        `SELECT attempt, outcome, gateway_cost_vnd FROM background_response_attempts
       WHERE response_id = $1 ORDER BY attempt`,
        [id],
      );
      expect(attempts.rows.map((a) => a.outcome)).toEqual(['lost', 'stored']);
      expect(attempts.rows[0].gateway_cost_vnd).toBeGreaterThan(0);
      // Recorded once as the gateway's own cost, with its attempt and the deployment its events came from.
      const { costs } = await attemptsAndCosts(id);
      expect(costs).toEqual([{ attempt: String(attempts.rows[0].attempt), cause: 'background_attempt_lost' }]);

      // verify-ledger: the response charged once from its hold, its lost attempt the gateway's cost.
      const verify = async () => {
        const out: string[] = [];
        const err: string[] = [];
        const env = { ...process.env, DATABASE_URL: h.config.databaseUrl };
        const code = await runAdmin(['verify-ledger', '--since', since, '--json'], {
          out: (l) => out.push(l),
          err: (l) => err.push(l),
          env,
        });
        return { code, json: JSON.parse(out.join('\n')), err: err.join('\n') };
      };
      const ok = await verify();
      expect(ok.err).toBe('');
      expect(ok).toMatchObject({
        code: 0,
        json: {
          ok: true,
          background_responses_checked: 1,
          background_attempts_lost: 1,
          background_lost_gateway_cost_vnd: attempts.rows[0].gateway_cost_vnd,
          background_charged_vnd: row.cost_vnd,
        },
      });
      // A lost attempt without its cost record (left open), and a charge that is not the stored attempt's bill.
      const lost = [id, attempts.rows[0].attempt];
      await h.deps.db.query(
        `UPDATE background_response_attempts SET ended_at = NULL, outcome = NULL
         WHERE response_id = $1 AND attempt = $2`,
        lost,
      );
      await h.deps.db.query('UPDATE background_responses SET cost_vnd = cost_vnd + 1 WHERE id = $1', [id]);
      try {
        const bad = await verify();
        expect(bad.code).toBe(1);
        expect(bad.err).toContain(`MISMATCH background response ${id} (attempt_open)`);
        expect(bad.err).toContain(`MISMATCH background response ${id} (charge)`);
      } finally {
        await h.deps.db.query(
          `UPDATE background_response_attempts SET ended_at = now(), outcome = 'lost'
           WHERE response_id = $1 AND attempt = $2`,
          lost,
        );
        await h.deps.db.query('UPDATE background_responses SET cost_vnd = cost_vnd - 1 WHERE id = $1', [id]);
      }
      expect((await verify()).code).toBe(0);
    } finally {
      await h.worker?.close();
      h.worker = null;
      h.emulator.control.reset();
    }
  },
  // Two processes started and killed, a retried run and the checks, on a machine shared with other test runs.
  180_000,
);

test('a worker stopped mid-answer (SIGTERM, a deploy) cancels nothing: another attempt completes it', async () => {
  const BAL = 5_000_000;
  const acc = await h.account(BAL);
  h.emulator.control.settings.chunkDelayMs = 60;
  // No shutdown grace: the run is cut short at once, as one still going when the grace ends is (the grace itself:
  // background-responses-shutdown.test.ts).
  const worker = await spawnWorker(h, {
    ...h.config,
    backgroundResponses: { ...h.config.backgroundResponses, shutdownGraceMs: 0 },
  });
  let id: string;
  try {
    const c = new OpenAI({ apiKey: acc.key, baseURL: `${h.url}/v1`, maxRetries: 0 });
    const input = Array.from({ length: 40 }, (_, i) => `word${i}`).join(' ');
    id = (await c.responses.create({ model: 'gpt-4o-mini', input, background: true })).id;
    await eventually(async () => {
      const n = await h.deps.db.query(
        'SELECT count(*)::int AS n FROM background_response_events WHERE response_id = $1',
        [id],
      );
      return n.rows[0].n >= 5;
    });
    await worker.kill('SIGTERM'); // a graceful stop: the run is told WORKER_SHUTDOWN
  } finally {
    await worker.kill('SIGKILL').catch(() => undefined);
  }
  expect((await h.deps.db.query('SELECT status FROM background_responses WHERE id = $1', [id])).rows[0].status).toBe(
    'in_progress',
  );
  await h.startWorker();
  try {
    const c = new OpenAI({ apiKey: acc.key, baseURL: `${h.url}/v1`, maxRetries: 0 });
    const done = await eventually(async () => {
      const r = await c.responses.retrieve(id);
      return ['completed', 'cancelled', 'failed'].includes(r.status!) ? r : null;
    });
    expect(done.status).toBe('completed');
    const attempts = await h.deps.db.query(
      'SELECT outcome FROM background_response_attempts WHERE response_id = $1 ORDER BY attempt',
      [id],
    );
    expect(attempts.rows.map((a) => a.outcome)).toEqual(['lost', 'stored']);
    const row = (await h.deps.db.query('SELECT cost_vnd FROM background_responses WHERE id = $1', [id])).rows[0];
    expect(await getBalance(h.deps.db, acc.accountId)).toMatchObject({ balance: BAL - row.cost_vnd, held: 0 });
  } finally {
    await h.worker?.close();
    h.worker = null;
    h.emulator.control.reset();
  }
}, 180_000);

test('every run slot taken: a response waits queued; cancelled there, it never runs and pays nothing', async () => {
  const BAL = 5_000_000;
  const acc = await h.account(BAL);
  h.emulator.control.settings.chunkDelayMs = 100;
  const w = await startWorker(
    {
      ...h.config,
      backgroundResponses: { ...h.config.backgroundResponses, concurrency: 1 },
    },
    { workflowCodePath: await workflowCodePath() },
  );
  try {
    const c = new OpenAI({ apiKey: acc.key, baseURL: `${h.url}/v1`, maxRetries: 0 });
    const input = Array.from({ length: 30 }, (_, i) => `word${i}`).join(' ');
    const first = await c.responses.create({ model: 'gpt-4o-mini', input, background: true });
    await eventually(async () => (await c.responses.retrieve(first.id)).status === 'in_progress');
    const waiting = await c.responses.create({ model: 'gpt-4o-mini', input: 'wait for a slot', background: true });
    await new Promise((r) => setTimeout(r, 1_000));
    expect((await c.responses.retrieve(waiting.id)).status).toBe('queued');
    expect((await c.responses.cancel(waiting.id)).status).toBe('cancelled');
    const done = await eventually(async () => {
      const r = await c.responses.retrieve(first.id);
      return r.status === 'completed' ? r : null;
    });
    const rows = await h.deps.db.query(
      `SELECT b.id, b.cost_vnd, (SELECT count(*)::int FROM background_response_attempts a WHERE a.response_id = b.id)
         AS attempts FROM background_responses b WHERE b.id = ANY($1)`,
      [[first.id, waiting.id]],
    );
    const by = Object.fromEntries(rows.rows.map((r) => [r.id, r]));
    expect(by[waiting.id]).toMatchObject({ cost_vnd: 0, attempts: 0 });
    expect(by[first.id].cost_vnd).toBeGreaterThan(0);
    expect(done.status).toBe('completed');
    expect(await getBalance(h.deps.db, acc.accountId)).toMatchObject({
      balance: BAL - by[first.id].cost_vnd,
      held: 0,
    });
  } finally {
    await w.close();
    h.emulator.control.reset();
  }
}, 180_000);

/** A price change in force from now: `model`'s input and output prices times 10 (undone by the function returned). */
async function priceRise(model: string) {
  const db = h.deps.db;
  const before = (await priceVersionAt(db, model))!;
  const config = h.deps.catalog.get(model)!;
  const set = (f: (n: number | undefined) => number) => ({
    pricing: {
      inputPer1MTokens: f(before.pricing.inputPer1MTokens),
      outputPer1MTokens: f(before.pricing.outputPer1MTokens),
    },
    batchPricing: {},
  });
  const change = (sets: ReturnType<typeof set>, note: string) =>
    schedulePriceChange(db, config, { sets, effectiveAt: null, note });
  await change(
    set((n) => (n ?? 0) * 10),
    'test: a rise',
  );
  return {
    before,
    undo: () =>
      change(
        set((n) => n ?? 0),
        'test: undone',
      ),
  };
}

/** Locks response `id`'s hold in `lock`'s transaction (opened here): its end cannot commit until it ends. */
async function lockHold(lock: { query(q: string, a?: unknown[]): Promise<unknown> }, id: string) {
  await lock.query('BEGIN');
  await lock.query(
    'SELECT 1 FROM holds h JOIN background_responses b ON b.hold_id = h.id WHERE b.id = $1 FOR UPDATE OF h',
    [id],
  );
}

/**
 * Holds response `id`'s end (its hold locked) until its terminal event `event` is stored, then kills `worker`: the
 * answer is stored, its end never committed.
 */
async function storeAnswerThenKill(id: string, event: string, worker: ChildWorker) {
  const db = h.deps.db;
  const lock = await db.connect();
  try {
    await lockHold(lock, id);
    await eventually(async () => {
      const r = await db.query(
        'SELECT count(*)::int AS n FROM background_response_events WHERE response_id = $1 AND event = $2',
        [id, event],
      );
      return r.rows[0].n === 1;
    });
    await new Promise((r) => setTimeout(r, 300));
    await worker.kill('SIGKILL');
  } finally {
    await lock.query('ROLLBACK');
    lock.release();
  }
}

/** The attempts of response `id`: outcome, deployment; and its gateway cost records. */
async function attemptsAndCosts(id: string) {
  const db = h.deps.db;
  const attempts = (
    await db.query(
      'SELECT attempt, outcome, deployment FROM background_response_attempts WHERE response_id = $1 ORDER BY attempt',
      [id],
    )
  ).rows;
  const costs = (await db.query('SELECT attempt, cause FROM gateway_costs WHERE ref_id = $1 ORDER BY attempt', [id]))
    .rows;
  return { attempts, costs };
}

test('the attempt that stored the terminal event dies before its end: the retry bills it as it would', async () => {
  const acc = await h.account(5_000_000);
  const since = new Date();
  const c = new OpenAI({ apiKey: acc.key, baseURL: `${h.url}/v1`, maxRetries: 0 });
  const db = h.deps.db;
  const q = async (sql: string, id: string) => (await db.query(sql, [id])).rows;
  // A native stream the upstream breaks off after its headers: the gateway ends it with its own response.failed
  // (no usage in it) and bills what the upstream was sent, estimated.
  h.emulator.control.addFault({ match: '/openai/v1/responses', resetAfterHeaders: true });
  h.emulator.control.settings.latencyMs = 500;
  const input = Array.from({ length: 2000 }, (_, i) => `word${i}`).join(' ');
  const worker = await spawnWorker(h);
  let id: string;
  let rise: Awaited<ReturnType<typeof priceRise>> | undefined;
  try {
    const reference = await c.responses.create({ model: 'gpt-5-codex', input, background: true });
    const ref = await eventually(async () => {
      const [r] = await q('SELECT status, cost_vnd FROM background_responses WHERE id = $1', reference.id);
      return r.status === 'failed' ? r : null;
    });
    expect(ref.cost_vnd).toBeGreaterThan(0);
    id = (await c.responses.create({ model: 'gpt-5-codex', input, background: true })).id;
    // Its end cannot commit (its hold is locked) once the terminal event is stored; then its worker dies.
    await storeAnswerThenKill(id, 'response.failed', worker);
    expect((await q('SELECT status FROM background_responses WHERE id = $1', id))[0].status).toBe('in_progress');
    // The prices rise after the answer was stored: the retry bills it at the prices in force when it was stored.
    rise = await priceRise('gpt-5-codex');
    await h.startWorker();
    const [end] = await eventually(async () => {
      const r = await q('SELECT status, cost_vnd, usage_id FROM background_responses WHERE id = $1', id);
      return r[0].status === 'failed' ? r : null;
    });
    // Estimated again from the stored request and events (the upstream body it was estimated from is not stored).
    expect(end.cost_vnd).toBeGreaterThan(0);
    expect(Math.abs(end.cost_vnd - ref.cost_vnd)).toBeLessThanOrEqual(ref.cost_vnd * 0.05);
    const [usage] = await q('SELECT deployment, price_version FROM usage_records WHERE id = $1', end.usage_id);
    expect(Number(usage.price_version)).toBe(rise.before.id);
    // Attempt 1's answer is the one charged: it is the stored attempt, not a lost one at the gateway's cost too;
    // the retry called no upstream. The usage record names the deployment that answered.
    const { attempts, costs } = await attemptsAndCosts(id);
    expect(attempts.map((a) => a.outcome)).toEqual(['stored', 'replayed']);
    expect(attempts[0].deployment).toEqual(expect.any(String));
    expect(usage.deployment).toBe(attempts[0].deployment);
    expect(costs).toEqual([]);
    expect((await verifyBackgroundResponses(db, { since })).mismatches).toEqual([]);
    expect((await verifyBackgroundResponses(db, { since })).attemptsLost).toBe(0);
  } finally {
    await rise?.undo();
    await worker.kill('SIGKILL').catch(() => undefined);
    await h.worker?.close();
    h.worker = null;
    h.emulator.control.reset();
  }
}, 180_000);

test('workflow lost after its answer was stored: the reconciler ends it from that answer, charged once', async () => {
  const BAL = 5_000_000;
  const acc = await h.account(BAL);
  const since = new Date();
  const c = new OpenAI({ apiKey: acc.key, baseURL: `${h.url}/v1`, maxRetries: 0 });
  const db = h.deps.db;
  const q = async (sql: string, id: string) => (await db.query(sql, [id])).rows;
  const worker = await spawnWorker(h);
  let rise: Awaited<ReturnType<typeof priceRise>> | undefined;
  try {
    const input = 'answer, then be lost';
    const { id } = await c.responses.create({ model: 'gpt-5-codex', input, background: true });
    // Its end cannot commit once the answer is stored; its worker dies, then its workflow is ended.
    await storeAnswerThenKill(id, 'response.completed', worker);
    await h.deps.temporal!.workflow.getHandle(`bgresp-${id}`).terminate('test: the workflow is lost');
    rise = await priceRise('gpt-5-codex');
    const rep = await reconcileBackgroundResponses(
      { db, temporal: h.deps.temporal!, config: h.config, catalog: h.deps.catalog },
      { graceMs: 0 },
    );
    expect(rep).toMatchObject({ endedFromStored: 1, failed: 0 });
    // Completed from its stored answer, charged once: its usage at the prices in force when it answered.
    const done = await c.responses.retrieve(id);
    expect(done.status).toBe('completed');
    expect(done.output_text).toBeTruthy();
    const [row] = await q('SELECT cost_vnd, usage_id FROM background_responses WHERE id = $1', id);
    const expected = usageCost(rise.before.pricing, fromResponsesUsage(done.usage!));
    expect(expected).toBeGreaterThan(0);
    expect(Number(row.cost_vnd)).toBe(expected);
    const [usage] = await q(
      'SELECT deployment, price_version, cost_vnd FROM usage_records WHERE id = $1',
      row.usage_id,
    );
    expect(Number(usage.price_version)).toBe(rise.before.id);
    const { attempts, costs } = await attemptsAndCosts(id);
    expect(attempts.map((a) => a.outcome)).toEqual(['stored']);
    expect(usage.deployment).toBe(attempts[0].deployment);
    expect(usage.deployment).toEqual(expect.any(String));
    expect(costs).toEqual([]);
    expect(await getBalance(db, acc.accountId)).toMatchObject({ balance: BAL - expected, held: 0 });
    expect((await verifyBackgroundResponses(db, { since })).mismatches).toEqual([]);
  } finally {
    await rise?.undo();
    await worker.kill('SIGKILL').catch(() => undefined);
    h.emulator.control.reset();
  }
}, 180_000);

test('an end slower than the heartbeat: the retry waits for it; that attempt stays the stored one', async () => {
  const BAL = 5_000_000;
  const acc = await h.account(BAL);
  const since = new Date();
  const c = new OpenAI({ apiKey: acc.key, baseURL: `${h.url}/v1`, maxRetries: 0 });
  const db = h.deps.db;
  const q = async (sql: string, id: string) => (await db.query(sql, [id])).rows;
  h.emulator.control.settings.latencyMs = 500;
  await h.startWorker();
  const lock = await db.connect();
  try {
    const { id } = await c.responses.create({ model: 'gpt-5-codex', input: 'end me slowly', background: true });
    // Its end waits for the hold (locked here) past the heartbeat timeout: Temporal starts another attempt, which
    // meets the end's lock on the response.
    await lockHold(lock, id);
    await eventually(async () => {
      const r = await db.query(
        `SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%background_response%'`,
      );
      return (r.rowCount ?? 0) > 0;
    });
    await lock.query('ROLLBACK');
    await h.deps.temporal!.workflow.getHandle(`bgresp-${id}`).result();
    const [row] = await q('SELECT status, cost_vnd FROM background_responses WHERE id = $1', id);
    expect(row.status).toBe('completed');
    expect(row.cost_vnd).toBeGreaterThan(0);
    const attempts = await q(
      'SELECT outcome FROM background_response_attempts WHERE response_id = $1 ORDER BY attempt',
      id,
    );
    // The first attempt's end committed (its bill charged): it is the stored one; any other ended nothing.
    expect(attempts.map((a) => a.outcome)).toEqual(['stored', ...attempts.slice(1).map(() => 'lost')]);
    expect(await getBalance(db, acc.accountId)).toMatchObject({ balance: BAL - row.cost_vnd, held: 0 });
    expect((await verifyBackgroundResponses(db, { since })).mismatches).toEqual([]);
  } finally {
    lock.release();
    await h.worker?.close();
    h.worker = null;
    h.emulator.control.reset();
  }
}, 180_000);

test('cancelled while its workflow was lost: the workflow the reconciler starts again runs nothing', async () => {
  const BAL = 5_000_000;
  const acc = await h.account(BAL);
  const c = new OpenAI({ apiKey: acc.key, baseURL: `${h.url}/v1`, maxRetries: 0 });
  // No worker yet: the response waits queued; then its workflow's history is lost (as video-edges.test.ts does).
  const { id } = await c.responses.create({ model: 'gpt-4o-mini', input: 'cancel me while lost', background: true });
  const workflowId = `bgresp-${id}`;
  await h.deps.temporal!.workflowService.deleteWorkflowExecution({
    namespace: h.config.temporalNamespace,
    workflowExecution: { workflowId },
  });
  await eventually(async () => (await workflowState(h.deps.temporal!, workflowId)).state === 'missing');
  // The cancel is recorded; its signal finds no workflow.
  expect((await c.responses.cancel(id)).status).toBe('queued');
  const rep = await reconcileBackgroundResponses(
    { db: h.deps.db, temporal: h.deps.temporal!, config: h.config, catalog: h.deps.catalog },
    { graceMs: 0 },
  );
  expect(rep.started).toBe(1);
  await h.startWorker();
  try {
    const done = await eventually(async () => {
      const r = await c.responses.retrieve(id);
      return ['completed', 'cancelled', 'failed'].includes(r.status!) ? r : null;
    });
    expect(done.status).toBe('cancelled');
    const upstream = h.emulator.control.requests.filter((r) => JSON.stringify(r.body).includes('cancel me while lost'));
    expect(upstream).toHaveLength(0);
    expect(await getBalance(h.deps.db, acc.accountId)).toMatchObject({ balance: BAL, held: 0 });
    expect(await verifyProjections(h.deps.db)).toEqual([]);
  } finally {
    await h.worker?.close();
    h.worker = null;
    h.emulator.control.reset();
  }
}, 180_000);
