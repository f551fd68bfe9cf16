import OpenAI from 'openai';
import { randomUUID } from 'node:crypto';
import { getBalance, verifyProjections } from '../../src/billing/ledger';
import { verifyBackgroundResponses } from '../../src/jobs/backgroundResponses/verify';
import { startWorker } from '../../src/worker';
import {
  eventually,
  fastBackgroundSettings,
  spawnWorker,
  startVideoHarness,
  type VideoHarness,
} from '../support/video';
import { workflowCodePath } from '../support/workflowCode';

/**
 * A deploy stops the worker (its close, as SIGTERM runs it) while a background response's upstream call is in
 * flight. Within the shutdown grace (BACKGROUND_SHUTDOWN_GRACE_MS) the run goes on and ends the response before the
 * close returns: the upstream called once, the response charged once. A run longer than the grace is cut short when
 * it ends: that attempt is closed as lost (the gateway's cost) and a later attempt, on a new worker, completes it.
 */

let h: VideoHarness;
beforeAll(async () => {
  h = await startVideoHarness(
    {},
    {
      // Heartbeats every second: heartbeats that stopped during the grace would lose the run.
      backgroundResponses: fastBackgroundSettings(),
    },
    { worker: false },
  );
}, 120_000);
afterAll(() => h?.close());
afterEach(() => h.emulator.control.reset());

const BAL = 5_000_000;
const MODEL = 'gpt-4o-mini'; // the emulated upstream echoes the input, a word per chunk

const withGrace = (shutdownGraceMs: number) => ({
  ...h.config,
  backgroundResponses: { ...h.config.backgroundResponses, shutdownGraceMs },
});
/** A worker with this shutdown grace, started in this process (its close is the one SIGTERM runs). */
const workerWithGrace = async (shutdownGraceMs: number) =>
  startWorker(withGrace(shutdownGraceMs), { workflowCodePath: await workflowCodePath() });

/** A background response of 40 words (one chunk each, paced by the emulator), once some of its events are stored. */
async function startInFlight(key: string, tag: string): Promise<string> {
  const c = new OpenAI({ apiKey: key, baseURL: `${h.url}/v1`, maxRetries: 0 });
  const input = `${tag} ` + Array.from({ length: 40 }, (_, i) => `word${i}`).join(' ');
  const { id } = await c.responses.create({ model: MODEL, input, background: true });
  await eventually(async () => {
    const n = await h.deps.db.query(
      'SELECT count(*)::int AS n FROM background_response_events WHERE response_id = $1',
      [id],
    );
    return n.rows[0].n >= 5;
  });
  return id;
}

/** The emulated upstream's calls for the response whose input carries `tag`. */
const upstreamCalls = (tag: string) =>
  h.emulator.control.requests.filter((r) => r.method === 'POST' && JSON.stringify(r.body ?? null).includes(tag)).length;

const responseRow = async (id: string) =>
  (await h.deps.db.query('SELECT * FROM background_responses WHERE id = $1', [id])).rows[0];

const attempts = async (id: string) =>
  (
    await h.deps.db.query(
      `SELECT attempt, outcome, gateway_cost_vnd FROM background_response_attempts
       WHERE response_id = $1 ORDER BY attempt`,
      [id],
    )
  ).rows;

/** Charged once: the response's one usage record, from its hold, nothing held, the ledger true. */
async function expectChargedOnce(accountId: string, id: string, lost: number): Promise<void> {
  const row = await responseRow(id);
  expect(row.status).toBe('completed');
  const usage = await h.deps.db.query('SELECT id, cost_vnd FROM usage_records WHERE account_id = $1', [accountId]);
  expect(usage.rows).toEqual([{ id: row.usage_id, cost_vnd: row.cost_vnd }]);
  expect(row.cost_vnd).toBeGreaterThan(0);
  expect(await getBalance(h.deps.db, accountId)).toMatchObject({ balance: BAL - row.cost_vnd, held: 0 });
  expect(await verifyProjections(h.deps.db)).toEqual([]);
  const verified = await verifyBackgroundResponses(h.deps.db, { since: row.created_at });
  expect(verified).toMatchObject({ responses: 1, attemptsLost: lost, chargedVnd: row.cost_vnd, mismatches: [] });
}

/** On a new harness worker (closed after): the response's workflow completes, then `check` runs. */
async function completedOnNextWorker(id: string, check: () => Promise<void>): Promise<void> {
  await h.startWorker();
  try {
    await eventually(async () => {
      const d = await h.deps.temporal!.workflow.getHandle(`bgresp-${id}`).describe();
      return d.status.name === 'COMPLETED';
    });
    await check();
  } finally {
    await h.worker?.close();
    h.worker = null;
  }
}

test('a run in flight when the worker stops ends in the grace: the upstream called once, charged once', async () => {
  const acc = await h.account(BAL);
  const tag = `grace-${randomUUID()}`;
  h.emulator.control.settings.chunkDelayMs = 100; // about 4 s of answer
  const w = await workerWithGrace(120_000); // far beyond the run, even on a loaded machine
  let id: string;
  try {
    id = await startInFlight(acc.key, tag);
    expect((await responseRow(id)).status).toBe('in_progress');
  } finally {
    await w.close(); // returns once the runs in flight ended (or the grace did)
  }
  // The close waited for the run: it ended the response, from its one attempt.
  expect((await responseRow(id)).status).toBe('completed');
  expect((await attempts(id)).map((a) => a.outcome)).toEqual(['stored']);
  // The workflow itself continues on the next worker, and runs nothing again.
  await completedOnNextWorker(id, async () => {
    expect(upstreamCalls(tag)).toBe(1);
    expect((await attempts(id)).map((a) => a.outcome)).toEqual(['stored']);
    await expectChargedOnce(acc.accountId, id, 0);
  });
}, 180_000);

test('a worker process SIGTERMed mid-run (a deploy) exits once the run ended: one upstream call', async () => {
  const acc = await h.account(BAL);
  const tag = `sigterm-${randomUUID()}`;
  h.emulator.control.settings.chunkDelayMs = 100;
  const worker = await spawnWorker(h, withGrace(120_000));
  let id: string;
  try {
    id = await startInFlight(acc.key, tag);
    await worker.kill('SIGTERM'); // resolves when the process exited
  } finally {
    await worker.kill('SIGKILL').catch(() => undefined);
  }
  expect((await responseRow(id)).status).toBe('completed');
  await completedOnNextWorker(id, async () => {
    expect((await attempts(id)).map((a) => a.outcome)).toEqual(['stored']);
    expect(upstreamCalls(tag)).toBe(1);
    await expectChargedOnce(acc.accountId, id, 0);
  });
}, 180_000);

test('a run longer than the grace is cut short at its end: that attempt lost, a new worker completes it', async () => {
  const acc = await h.account(BAL);
  const tag = `cut-${randomUUID()}`;
  h.emulator.control.settings.chunkDelayMs = 200; // about 9 s of answer, 7 s still to come when the worker stops
  const w = await workerWithGrace(300);
  let id: string;
  try {
    id = await startInFlight(acc.key, tag);
  } finally {
    await w.close();
  }
  expect((await responseRow(id)).status).toBe('in_progress');
  expect(upstreamCalls(tag)).toBe(1);
  await completedOnNextWorker(id, async () => {
    const tries = await attempts(id);
    expect(tries.map((a) => a.outcome)).toEqual(['lost', 'stored']);
    expect(tries[0].gateway_cost_vnd).toBeGreaterThan(0); // the cut attempt: the gateway's cost, not the customer's
    expect(upstreamCalls(tag)).toBe(2);
    await expectChargedOnce(acc.accountId, id, 1);
  });
}, 180_000);
