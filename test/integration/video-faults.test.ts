import { randomUUID } from 'node:crypto';
import { getBalance, listLedger, placeHold, verifyProjections } from '../../src/billing/ledger';
import { createJobWithHold, getJob, listEvents } from '../../src/jobs/video/repo';
import { eventually, videoHarnessForFile, type VideoHarness } from '../support/video';
import { charges as chargesOf } from '../support/records';
import { WORKFLOW_TEST_MS } from '../support/budgets';
import { chargePerSecond } from '../support/videoPrices';

/**
 * Provider failures, content filters, expiry, transient outages, copy failures and crash repairs, each ending
 * with the money right: a failed/expired job releases its whole hold and charges nothing; a completed one
 * charges once.
 */

const VEO = 'veo-3.1-generate-preview';
const SEEDANCE = 'seedance-2-0';
const BALANCE = 10_000_000;
// What the emulator delivers by default, at the catalog's price per second: Veo 720p with audio, Seedance 720p with
// audio on the default tier.
const VEO_720P = chargePerSecond(VEO, { resolution: '720p', audio: true });
const SEEDANCE_720P = chargePerSecond(SEEDANCE, { resolution: '720p', audio: true, tier: 'default' });

let h: VideoHarness;
videoHarnessForFile((x) => (h = x));

const charges = (accountId: string) => chargesOf(h.deps, accountId);

async function expectReleased(accountId: string): Promise<void> {
  expect(await getBalance(h.deps.db, accountId)).toEqual({ balance: BALANCE, held: 0, available: BALANCE });
  expect(await charges(accountId)).toEqual([]);
  const released = (await listLedger(h.deps.db, accountId)).filter((e) => e.kind === 'hold_released');
  expect(released.length).toBeGreaterThan(0);
}

test.each([
  ['Veo failure', VEO, '[fail]', 'failed', /failed/],
  ['Veo content filter', VEO, '[filter]', 'failed', /safety filter/],
  ['Seedance failure', SEEDANCE, '[fail]', 'failed', /failed/],
  ['Seedance content filter', SEEDANCE, '[filter]', 'failed', /sensitive content/],
  ['Seedance expired', SEEDANCE, '[expire]', 'expired', null],
  ['provider rejects the submission (4xx)', SEEDANCE, '[reject]', 'failed', /rejected/],
])(
  '%s (%s, prompt marker %s): job ends %s, hold released, nothing charged',
  async (_name, model, marker, status, message) => {
    const acc = await h.account(BALANCE);
    const job = await h.submit(acc.key, { model, prompt: `scene ${marker}`, seconds: 4 });
    const done = await h.final(acc.key, job.id);
    expect(done.status).toBe(status);
    if (status === 'failed') expect(done.error.message).toMatch(message as RegExp);
    else expect(done.error).toBeUndefined();
    expect(done.usage).toBeUndefined();
    await expectReleased(acc.accountId);
    if (marker === '[filter]') expect(done.error.code).toBe('content_filter');
    if (marker === '[reject]') {
      // A rejection is final at once: exactly one submission attempt.
      expect(
        h.emulator.control.requests.filter(
          (r) => r.method === 'POST' && JSON.stringify(r.body).includes(`scene ${marker}`),
        ),
      ).toHaveLength(1);
    }
  },
);

test('no result before the deadline: expired (Veo never finishes), provider not charged, hold released', async () => {
  const acc = await h.account(BALANCE);
  const saved = h.deps.config.video.deadlineMs;
  h.deps.config.video.deadlineMs = 1500;
  try {
    const job = await h.submit(acc.key, { model: VEO, prompt: 'forever [hang]', seconds: 4 });
    const done = await h.final(acc.key, job.id);
    expect(done.status).toBe('expired');
    await expectReleased(acc.accountId);
    const row = await getJob(h.deps.db, job.id);
    expect(row!.errorCode).toBe('deadline_exceeded');
  } finally {
    h.deps.config.video.deadlineMs = saved;
  }
});

test('provider 500s, dropped connections and timeouts for a while: the job still completes, charged once', async () => {
  const acc = await h.account(BALANCE);
  const c = h.emulator.control;
  // One of each is enough to prove each path (every retry waits on a server-side timer, about a second here).
  c.addFault({ match: 'POST /veo/v1beta/models/', status: 500, times: 1 });
  c.addFault({ match: 'POST /veo/v1beta/models/', drop: true, times: 1 });
  c.addFault({ match: '/operations/', status: 503, times: 1 });
  // Longer than the activity's start-to-close timeout (3 s): the attempt times out and is retried.
  c.addFault({ match: '/operations/', delayMs: 3500, times: 1 });
  c.addFault({ match: 'GET /veo/_media/', status: 502, times: 1 });
  const job = await h.submit(acc.key, { model: VEO, prompt: 'through the storm', seconds: 4 });
  const done = await h.final(acc.key, job.id);
  expect(done).toMatchObject({ status: 'completed', usage: { duration_seconds: 4, cost_vnd: 4 * VEO_720P } });
  expect(await charges(acc.accountId)).toHaveLength(1);
  expect(await getBalance(h.deps.db, acc.accountId)).toEqual({
    balance: BALANCE - 4 * VEO_720P,
    held: 0,
    available: BALANCE - 4 * VEO_720P,
  });
  // Faults are answered before the emulator records a request: the one recorded POST is the accepted one.
  expect(
    c.requests.filter((r) => r.method === 'POST' && JSON.stringify(r.body).includes('through the storm')),
  ).toHaveLength(1);
  const kinds = (await listEvents(h.deps.db, job.id)).map((e) => e.kind).filter((k) => k !== 'workflow_started');
  expect(kinds).toEqual(['submitted', 'provider_submitted', 'processing', 'video_copied', 'completed']);
}, 60_000);

test('a result that cannot be copied within the copy window fails the job and charges nothing', async () => {
  const acc = await h.account(BALANCE);
  const saved = h.deps.config.video.copyWindowMs;
  h.deps.config.video.copyWindowMs = 1500;
  h.emulator.control.addFault({ match: 'GET /seedance/_tos/', status: 500 });
  try {
    const job = await h.submit(acc.key, { model: SEEDANCE, prompt: 'uncopyable', seconds: 5 });
    const done = await h.final(acc.key, job.id);
    expect(done.status).toBe('failed');
    expect(done.error).toMatchObject({ code: 'copy_failed', message: expect.stringContaining('could not be copied') });
    await expectReleased(acc.accountId);
  } finally {
    h.deps.config.video.copyWindowMs = saved;
  }
});

test('a provider 404 on the result (gone) fails at once, not after the copy window', async () => {
  const acc = await h.account(BALANCE);
  const saved = h.deps.config.video.copyWindowMs;
  // A window far longer than h.final() waits: only a non-retried 404 can end the job in time.
  h.deps.config.video.copyWindowMs = 3_600_000;
  h.emulator.control.addFault({ match: 'GET /seedance/_tos/', status: 404 });
  try {
    const job = await h.submit(acc.key, { model: SEEDANCE, prompt: 'gone', seconds: 5 });
    const done = await h.final(acc.key, job.id);
    expect(done.error.code).toBe('copy_failed');
    await expectReleased(acc.accountId);
  } finally {
    h.deps.config.video.copyWindowMs = saved;
  }
});

test('reconciler: a job whose workflow never started (crash after the hold) is started and completes', async () => {
  const acc = await h.account(BALANCE);
  const id = randomUUID();
  // What POST /v1/videos commits before starting the workflow; then the "API crashes".
  await createJobWithHold(h.deps.db, {
    id,
    accountId: acc.accountId,
    apiKeyId: null,
    model: SEEDANCE,
    provider: 'emulator-seedance',
    requestHash: 'x',
    idempotencyKey: null,
    request: { prompt: 'orphaned job', seconds: 5, returnLastFrame: false, images: {} },
    seconds: 5,
    // A job as an older build recorded it: one price per second, no price table (charged at that price).
    pricePerSecond: 3600,
    maxCostVnd: 5 * 3600,
    holdId: randomUUID(),
  });
  expect((await getBalance(h.deps.db, acc.accountId))!.held).toBe(5 * 3600);
  const done = await h.final(acc.key, id);
  expect(done).toMatchObject({ status: 'completed', usage: { cost_vnd: 5 * 3600 } });
  const kinds = (await listEvents(h.deps.db, id)).map((e) => [e.kind, e.data.by]);
  expect(kinds).toContainEqual(['workflow_started', 'reconciler']);
  expect(await charges(acc.accountId)).toHaveLength(1);
});

test(
  'reconciler: a video hold without a job is released; a job whose workflow ended fails, releases',
  async () => {
    const acc = await h.account(BALANCE);
    const holdId = randomUUID();
    await placeHold(h.deps.db, {
      accountId: acc.accountId,
      holdId,
      amount: 12345,
      idempotencyKey: `orphan-${holdId}`,
      refType: 'video_job',
      refId: randomUUID(),
    });
    const job = await h.submit(acc.key, { model: VEO, prompt: 'terminated [polls=100000]', seconds: 4 });
    await eventually(async () => (await getJob(h.deps.db, job.id))?.providerTaskId);
    await h.deps.temporal!.workflow.getHandle(`video-${job.id}`).terminate('operator test');
    const done = await h.final(acc.key, job.id);
    expect(done).toMatchObject({
      status: 'failed',
      error: { code: 'workflow_ended', message: expect.stringContaining('terminated') },
    });
    await eventually(async () => (await getBalance(h.deps.db, acc.accountId))!.held === 0);
    await expectReleased(acc.accountId);
    expect(await verifyProjections(h.deps.db)).toEqual([]);
  },
  WORKFLOW_TEST_MS,
);

test(
  'reconciler: a job whose workflow history is gone restarts and resumes the recorded provider task',
  async () => {
    const acc = await h.account(BALANCE);
    const job = await h.submit(acc.key, { model: SEEDANCE, prompt: 'lost history [polls=5]', seconds: 5 });
    const taskId = await eventually(async () => (await getJob(h.deps.db, job.id))?.providerTaskId);
    const handle = h.deps.temporal!.workflow.getHandle(`video-${job.id}`);
    const firstRun = (await handle.describe()).runId;
    await h.deps.temporal!.workflowService.deleteWorkflowExecution({
      namespace: h.config.temporalNamespace,
      workflowExecution: { workflowId: handle.workflowId },
    });
    const done = await h.final(acc.key, job.id);
    expect(done).toMatchObject({ status: 'completed', usage: { cost_vnd: 5 * SEEDANCE_720P } });
    // One provider task for the job, polled by both workflow runs; one charge.
    expect(
      h.emulator.control.requests.filter((r) => r.method === 'POST' && JSON.stringify(r.body).includes('lost history')),
    ).toHaveLength(1);
    expect(h.emulator.control.requests.some((r) => r.method === 'GET' && r.path.endsWith(taskId))).toBe(true);
    expect(await charges(acc.accountId)).toHaveLength(1);
    const secondRun = await eventually(async () => {
      const d = await handle.describe();
      return d.status.name === 'COMPLETED' ? d : null;
    });
    expect(secondRun.runId).not.toBe(firstRun);
  },
  WORKFLOW_TEST_MS,
);

test('DELETE while the provider is down (submission being retried) cancels at once and releases the hold', async () => {
  const acc = await h.account(BALANCE);
  h.emulator.control.addFault({ match: 'POST /seedance/', status: 503 });
  const job = await h.submit(acc.key, { model: SEEDANCE, prompt: 'never accepted', seconds: 5 });
  const del = await fetch(`${h.url}/v1/videos/${job.id}`, {
    method: 'DELETE',
    headers: { authorization: `Bearer ${acc.key}` },
  });
  expect(del.status).toBe(200);
  expect(await del.json()).toMatchObject({ status: 'failed', error: { code: 'cancelled' } });
  await expectReleased(acc.accountId);
});
