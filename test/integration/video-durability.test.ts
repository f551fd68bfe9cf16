import { getBalance, listLedger, verifyProjections } from '../../src/billing/ledger';
import { getJob, listEvents } from '../../src/video/jobs';
import { eventually, spawnWorker, startVideoHarness, type VideoHarness } from '../support/video';

/**
 * Durability against the real Temporal dev server and Postgres: a worker process SIGKILLed mid-job and a new one
 * started finishes the job with exactly one charge; 50 concurrent submissions against a balance that covers 10
 * accept exactly 10 and the ledger reconciles once all are final.
 */

const VEO = 'veo-3.1-generate-preview';
const PRICE = 10400;

let h: VideoHarness;
beforeAll(async () => {
  h = await startVideoHarness({}, {}, { worker: false });
});
afterAll(async () => {
  await h?.close();
});

type Json = any;
const post = async (key: string, body: Record<string, unknown>) =>
  fetch(`${h.url}/v1/videos`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
const final = (key: string, id: string, ms = 30_000) =>
  eventually(async () => {
    const j: Json = await (
      await fetch(`${h.url}/v1/videos/${id}`, { headers: { authorization: `Bearer ${key}` } })
    ).json();
    return ['completed', 'failed', 'expired'].includes(j.status) ? j : null;
  }, ms);

test('the worker process is SIGKILLed mid-job; a new worker finishes it with exactly one charge and one provider task', async () => {
  const acc = await h.account(1_000_000);
  const first = await spawnWorker(h);
  const job: Json = await (
    await post(acc.key, { model: VEO, prompt: 'survive the crash [polls=6]', seconds: 8 })
  ).json();
  // Mid-job: submitted to the provider and polled at least twice, not yet finished.
  const taskId = await eventually(async () => (await getJob(h.deps.db, job.id))?.providerTaskId);
  await eventually(
    async () => h.emulator.control.requests.filter((r) => r.method === 'GET' && r.path.endsWith(taskId)).length >= 2,
  );
  await first.kill('SIGKILL');
  expect((await getJob(h.deps.db, job.id))!.status).toBe('processing');

  const second = await spawnWorker(h);
  try {
    const done = await final(acc.key, job.id);
    expect(done).toMatchObject({ status: 'completed', usage: { duration_seconds: 8, cost_vnd: 8 * PRICE } });
  } finally {
    await second.kill('SIGTERM');
  }
  const ledger = await listLedger(h.deps.db, acc.accountId);
  expect(ledger.filter((e) => e.kind === 'charged')).toHaveLength(1);
  expect(ledger.filter((e) => e.kind === 'hold_released')).toHaveLength(1);
  expect(await getBalance(h.deps.db, acc.accountId)).toEqual({
    balance: 1_000_000 - 8 * PRICE,
    held: 0,
    available: 1_000_000 - 8 * PRICE,
  });
  // One submission upstream: the resumed workflow kept polling the recorded task.
  expect(
    h.emulator.control.requests.filter(
      (r) => r.method === 'POST' && JSON.stringify(r.body).includes('survive the crash'),
    ),
  ).toHaveLength(1);
  const kinds = (await listEvents(h.deps.db, job.id)).map((e) => e.kind);
  expect(kinds.filter((k) => k === 'completed')).toHaveLength(1);
}, 120_000);

test('50 concurrent submissions against a balance covering 10: exactly 10 accepted, the rest 402; the ledger reconciles', async () => {
  const perJob = 4 * PRICE;
  const acc = await h.account(10 * perJob);
  await h.startWorker();
  const results = await Promise.all(
    Array.from({ length: 50 }, (_, i) => post(acc.key, { model: VEO, prompt: `crowd ${i}`, seconds: 4 })),
  );
  const statuses = results.map((r) => r.status);
  expect(statuses.filter((s) => s === 202)).toHaveLength(10);
  expect(statuses.filter((s) => s === 402)).toHaveLength(40);
  const bodies: Json[] = await Promise.all(results.map((r) => r.json()));
  expect(bodies.filter((b) => b.error).every((b) => b.error.type === 'insufficient_quota')).toBe(true);
  expect(await getBalance(h.deps.db, acc.accountId)).toEqual({ balance: 10 * perJob, held: 10 * perJob, available: 0 });

  const accepted = bodies.filter((b) => b.status === 'submitted');
  const done = await Promise.all(accepted.map((b) => final(acc.key, b.id, 60_000)));
  expect(done.every((d) => d.status === 'completed')).toBe(true);
  expect(await getBalance(h.deps.db, acc.accountId)).toEqual({ balance: 0, held: 0, available: 0 });
  expect((await listLedger(h.deps.db, acc.accountId, 500)).filter((e) => e.kind === 'charged')).toHaveLength(10);
  const n = await h.deps.db.query('SELECT count(*)::int AS n FROM video_jobs WHERE account_id = $1', [acc.accountId]);
  expect(n.rows[0].n).toBe(10);
  expect(await verifyProjections(h.deps.db)).toEqual([]);
}, 120_000);
