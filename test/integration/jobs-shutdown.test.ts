import OpenAI, { toFile } from 'openai';
import { randomUUID } from 'node:crypto';
import { getBalance, listLedger, verifyProjections } from '../../src/billing/ledger';
import { loadBatchSettings } from '../../src/jobs/batches/settings';
import { workflowIdOf } from '../../src/jobs/batches/repo';
import { getJob, listEvents } from '../../src/jobs/video/repo';
import { startWorker } from '../../src/worker';
import { eventually, startVideoHarness, type VideoHarness } from '../support/video';
import { chargePerSecond } from '../support/videoPrices';
import { workflowCodePath } from '../support/workflowCode';

/**
 * A deploy stops the worker (its close, as SIGTERM runs it) while the jobs' activities are in flight. Within the
 * shutdown grace (JOBS_SHUTDOWN_GRACE_MS) they go on to their end before the close returns: a batch chunk whose
 * lines are answering sends the rest of its lines and commits itself (each line sent upstream once), and a video
 * job's submit waiting for its provider's answer records the provider's task (submitted once, not again by the next
 * worker). A new worker then finishes both, each charged once. (With no grace the chunk commits nothing, its unsent
 * lines left to the next worker, and the submit is cut mid-request and sent again: the provider paid twice.)
 */

let h: VideoHarness;
beforeAll(async () => {
  h = await startVideoHarness(
    {},
    {
      batches: {
        ...loadBatchSettings(),
        // One chunk of six lines, two at a time: lines are in flight and others still to send when the worker stops.
        concurrency: 2,
        chunkLines: 6,
        heartbeatMs: 1_500, // heartbeats that stopped during the grace would lose the chunk within 1.5 s
        activityRetryInitialMs: 50,
        activityRetryMaxMs: 400,
        chunkTimeoutMs: 60_000,
        activityTimeoutMs: 10_000,
      },
    },
    { worker: false },
  );
}, 120_000);
afterAll(() => h?.close());
afterEach(() => h.emulator.control.reset());

const BAL = 5_000_000;
const LINES = 6;
const VEO = 'veo-3.1-generate-preview';

/** A worker with this grace for the jobs, started in this process (its close is the one SIGTERM runs). */
const workerWithGrace = async (shutdownGraceMs: number) =>
  startWorker(
    { ...h.config, jobs: { ...h.config.jobs, shutdownGraceMs } },
    { workflowCodePath: await workflowCodePath() },
  );

/** Runs `check` once a new harness worker (closed after) got `done` true. */
async function onNextWorker(done: () => Promise<boolean>, check: () => Promise<void>): Promise<void> {
  await h.startWorker();
  try {
    await eventually(done);
    await check();
  } finally {
    await h.worker?.close();
    h.worker = null;
  }
}

/** The account's money after its one job: charged once (`costVnd`), nothing held, the ledger true. */
async function expectChargedOnce(accountId: string, costVnd: number): Promise<void> {
  expect(costVnd).toBeGreaterThan(0);
  const ledger = await listLedger(h.deps.db, accountId);
  expect(ledger.filter((e) => e.kind === 'hold_placed')).toHaveLength(1);
  expect(ledger.filter((e) => e.kind === 'hold_released')).toHaveLength(1);
  expect(ledger.filter((e) => e.kind === 'charged').reduce((s, e) => s + e.amount, 0)).toBe(costVnd);
  expect(await getBalance(h.deps.db, accountId)).toMatchObject({ balance: BAL - costVnd, held: 0 });
  expect(await verifyProjections(h.deps.db)).toEqual([]);
}

test('a batch chunk in flight when the worker stops sends its lines and commits: each line sent once', async () => {
  const acc = await h.account(BAL);
  const openai = new OpenAI({ apiKey: acc.key, baseURL: `${h.url}/v1`, maxRetries: 0 });
  const tag = `grace-${randomUUID()}`;
  const ids = Array.from({ length: LINES }, (_, i) => `${tag}-${i}`);
  const input = ids
    .map((id) =>
      JSON.stringify({
        custom_id: id,
        method: 'POST',
        url: '/v1/chat/completions',
        body: { model: 'gpt-4o-mini', messages: [{ role: 'user', content: `line ${id}` }], max_tokens: 20 },
      }),
    )
    .join('\n');
  const file = await openai.files.create({ file: await toFile(Buffer.from(input), 'in.jsonl'), purpose: 'batch' });
  // Each line answers in a second: the chunk takes about 3 s, three pairs of lines, and goes on in the grace for
  // longer than its heartbeat timeout.
  h.emulator.control.settings.latencyMs = 1_000;
  const w = await workerWithGrace(120_000); // far beyond the chunk, even on a loaded machine
  let batchId: string;
  let closeMs: number;
  try {
    const b = await openai.batches.create({
      input_file_id: file.id,
      endpoint: '/v1/chat/completions',
      completion_window: '24h',
    });
    batchId = b.id;
    // The first lines are sent (claimed before sending) and none answered yet.
    await eventually(
      async () => {
        const r = await h.deps.db.query(`SELECT state FROM batch_lines WHERE batch_id = $1`, [batchId]);
        return r.rows.length > 0 && r.rows.every((x) => x.state === 'sent');
      },
      { every: 10 },
    );
  } finally {
    const t0 = Date.now();
    await w.close(); // returns once the activities in flight ended (or the grace did)
    closeMs = Date.now() - t0;
  }
  // The close waited for the chunk: all its lines answered and the chunk committed, from its one attempt.
  const chunks = await h.deps.db.query('SELECT completed, failed FROM batch_chunks WHERE batch_id = $1', [batchId]);
  expect(chunks.rows).toEqual([{ completed: LINES, failed: 0 }]);
  expect(closeMs).toBeGreaterThan(1_000);
  const sent = () =>
    ids.map(
      (id) =>
        h.emulator.control.requests.filter(
          (r) => r.path.endsWith('/chat/completions') && JSON.stringify(r.body).includes(id),
        ).length,
    );
  expect(sent()).toEqual(ids.map(() => 1));
  h.emulator.control.settings.latencyMs = 0;
  // The workflow goes on on the next worker: it finalizes the batch and sends nothing again.
  await onNextWorker(
    async () => (await openai.batches.retrieve(batchId)).status === 'completed',
    async () => {
      const done = await openai.batches.retrieve(batchId);
      expect(done.request_counts).toMatchObject({ total: LINES, completed: LINES, failed: 0 });
      const out = await (await openai.files.content(done.output_file_id!)).text();
      const lines = out
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { custom_id: string });
      expect(lines.map((l) => l.custom_id).sort()).toEqual([...ids].sort());
      expect(sent()).toEqual(ids.map(() => 1));
      const usage = await h.deps.db.query('SELECT count(*)::int AS n FROM usage_records WHERE account_id = $1', [
        acc.accountId,
      ]);
      expect(usage.rows[0].n).toBe(LINES);
      // The chunk's one attempt heartbeat through the grace: Temporal never gave it up for another (a retried
      // activity's history shows the attempt that ended it).
      const history = await h.deps.temporal!.workflow.getHandle(workflowIdOf(batchId)).fetchHistory();
      const attempts = history.events!.flatMap((e) =>
        e.activityTaskStartedEventAttributes ? [e.activityTaskStartedEventAttributes.attempt] : [],
      );
      expect(attempts.length).toBeGreaterThan(0);
      expect(attempts.every((a) => a === 1)).toBe(true);
      const row = await h.deps.db.query('SELECT cost_vnd FROM batches WHERE id = $1', [batchId]);
      await expectChargedOnce(acc.accountId, Number(row.rows[0].cost_vnd));
    },
  );
}, 60_000);

test('a video submit in flight when the worker stops records its task: submitted upstream once', async () => {
  const acc = await h.account(BAL);
  const tag = `grace-${randomUUID()}`;
  // The provider takes 2 s to accept a submission; the fault counts every submission that reached it.
  h.emulator.control.addFault({ match: ':predictLongRunning', delayMs: 2_000 });
  const w = await workerWithGrace(120_000);
  let jobId: string;
  try {
    jobId = (await h.submit(acc.key, { model: VEO, prompt: `${tag} [polls=2]`, seconds: 4 })).id;
    await eventually(async () => h.emulator.control.faultsApplied > 0, { every: 10 }); // the submission is upstream
    expect((await getJob(h.deps.db, jobId))!.providerTaskId).toBeNull();
  } finally {
    await w.close();
  }
  // The close waited for the provider's answer: the job has its task, from the one submission.
  const taskId = (await getJob(h.deps.db, jobId))!.providerTaskId;
  expect(taskId).toBeTruthy();
  expect(h.emulator.control.faultsApplied).toBe(1);
  await onNextWorker(
    async () => (await getJob(h.deps.db, jobId))!.status === 'completed',
    async () => {
      expect(h.emulator.control.faultsApplied).toBe(1); // not submitted again
      const job = (await getJob(h.deps.db, jobId))!;
      expect(job.providerTaskId).toBe(taskId);
      const events = (await listEvents(h.deps.db, jobId)).map((e) => e.kind);
      expect(events).not.toContain('provider_task_duplicate');
      await expectChargedOnce(acc.accountId, 4 * chargePerSecond(VEO, { resolution: '720p', audio: true }));
    },
  );
}, 60_000);
