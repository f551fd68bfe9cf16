import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { getBalance, listLedger, verifyProjections } from '../../src/billing/ledger';
import { createJobWithHold, endJob, getJob, listEvents } from '../../src/video/repo';
import { verifyUsage } from '../../src/billing/usageVerify';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createVideoActivities } from '../../activities/video';
import { VideoProviders } from '../../src/providers/videoProviders';
import { eventually, videoHarnessForFile, type VideoHarness } from '../support/video';
import { WORKFLOW_TEST_MS } from '../support/budgets';
import { catalogPricing, chargePerSecond, holdPerSecond } from '../support/videoPrices';
import type { PriceSet } from '../../src/catalog/catalog';

/**
 * The edges of a video job where money or files could slip: a cancel at any moment leaves no provider task
 * running unknown; the end of a job is one commit (charge, release of the hold and the status change together).
 */

const SEEDANCE = 'seedance-2-0';
const VEO = 'veo-3.1-generate-preview';
const BALANCE = 10_000_000;

let h: VideoHarness;
videoHarnessForFile((x) => (h = x));

type Json = any;
const eventKinds = async (jobId: string) => (await listEvents(h.deps.db, jobId)).map((e) => e.kind);

/** The gateway's own costs recorded for video job `id` (src/billing/gatewayCosts.ts). */
async function gatewayCostsOf(id: string) {
  const r = await h.deps.db.query(
    `SELECT cause, deployment, cost_vnd::int AS cost_vnd, units, account_id FROM gateway_costs
     WHERE ref_type = 'video_job' AND ref_id = $1 ORDER BY id`,
    [id],
  );
  return r.rows;
}

/** DELETE while the provider holds the create-task request: returns once the job is final. */
async function cancelDuringCreation(key: string, model: string, prompt: string, createPath: string): Promise<Json> {
  h.emulator.control.addFault({ match: `POST ${createPath}`, delayMs: 1500, times: 1 });
  const job = await h.submit(key, { model, prompt, seconds: model === VEO ? 4 : 5 });
  // The create request is at the provider (the fault is delaying it), and no task id is known yet.
  await eventually(async () => h.emulator.control.faultsApplied === 1);
  expect((await getJob(h.deps.db, job.id))!.providerTaskId).toBeNull();
  const del = await h.api(key, `/v1/videos/${job.id}`, { method: 'DELETE' });
  expect([200, 202]).toContain(del.status);
  return eventually(async () => {
    const j: Json = await (await h.api(key, `/v1/videos/${job.id}`)).json();
    return j.status === 'failed' ? j : null;
  });
}

test(
  'DELETE while Seedance creates the task: the task is recorded and cancelled at the provider',
  async () => {
    const acc = await h.account(BALANCE);
    const out = await cancelDuringCreation(
      acc.key,
      SEEDANCE,
      'cancel during creation',
      '/seedance/api/v3/contents/generations/tasks',
    );
    expect(out.error).toMatchObject({ code: 'cancelled' });
    const taskId = await eventually(async () => (await getJob(h.deps.db, out.id))?.providerTaskId);
    await eventually(async () => (await eventKinds(out.id)).includes('provider_task_cancelled'));
    const c = h.emulator.control;
    expect(c.requests.filter((r) => r.method === 'DELETE' && r.path.endsWith(`/tasks/${taskId}`))).toHaveLength(1);
    // The provider shows the task cancelled: it will not run (nor cost).
    const task = (await (
      await fetch(`${h.emulator.url}/seedance/api/v3/contents/generations/tasks/${taskId}`)
    ).json()) as Json;
    expect(task.status).toBe('cancelled');
    expect(await getBalance(h.deps.db, acc.accountId)).toEqual({ balance: BALANCE, held: 0, available: BALANCE });
    expect(await verifyProjections(h.deps.db)).toEqual([]);
  },
  WORKFLOW_TEST_MS,
);

test(
  'DELETE while Veo creates the operation (no cancel there): the job ends, the task is followed',
  async () => {
    const acc = await h.account(BALANCE);
    const out = await cancelDuringCreation(acc.key, VEO, 'cancel during creation [polls=4]', '/veo/v1beta/models/');
    expect(out.error).toMatchObject({ code: 'cancelled' });
    const taskId = await eventually(async () => (await getJob(h.deps.db, out.id))?.providerTaskId);
    const ended = await eventually(async () =>
      (await listEvents(h.deps.db, out.id)).find((e) => e.kind === 'provider_task_ended'),
    );
    expect(ended.data).toMatchObject({ taskId, state: 'succeeded' });
    // The job's terms: a cancelled job charges nothing, whatever the provider did with the task.
    const job = (await getJob(h.deps.db, out.id))!;
    // What the provider billed for the task that could not be cancelled is the gateway's own cost, recorded once.
    const costs = await gatewayCostsOf(out.id);
    expect(costs).toEqual([
      {
        cause: 'video_task_uncancelled',
        deployment: job.deployment,
        cost_vnd: ended.data.gatewayCostVnd,
        units: { video_seconds: 4 },
        account_id: acc.accountId,
      },
    ]);
    expect(ended.data.gatewayCostVnd).toBeGreaterThan(0);
    expect(job).toMatchObject({ status: 'failed', errorCode: 'cancelled', costVnd: null, videoKey: null });
    expect(await getBalance(h.deps.db, acc.accountId)).toEqual({ balance: BALANCE, held: 0, available: BALANCE });
    expect((await listLedger(h.deps.db, acc.accountId)).filter((e) => e.kind === 'charged')).toEqual([]);
  },
  WORKFLOW_TEST_MS,
);

/** A job with its hold, as POST /v1/videos commits it (no workflow: the test drives the end itself). */
async function heldJob(
  accountId: string,
  m: { model: string; provider: string; seconds: number; price: number; prompt: string; pricing?: PriceSet } = {
    model: SEEDANCE,
    provider: 'emulator-seedance',
    seconds: 5,
    price: 3600,
    prompt: 'edge',
  },
): Promise<{ id: string; holdId: string }> {
  const id = randomUUID();
  const holdId = randomUUID();
  await createJobWithHold(h.deps.db, {
    id,
    accountId,
    apiKeyId: null,
    model: m.model,
    provider: m.provider,
    requestHash: 'x',
    idempotencyKey: null,
    request: { prompt: m.prompt, seconds: m.seconds, returnLastFrame: false, images: {} },
    seconds: m.seconds,
    pricePerSecond: m.price,
    maxCostVnd: m.seconds * m.price,
    holdId,
    ...(m.pricing ? { pricing: m.pricing } : {}),
  });
  return { id, holdId };
}

/** Makes the status change of `jobId` to `kind` fail inside Postgres (a crash between the two writes). */
async function failStatusChange(jobId: string, kind: string): Promise<() => Promise<void>> {
  const fn = `fail_${jobId.replace(/-/g, '')}`;
  await h.deps.db.query(`CREATE FUNCTION ${fn}() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.job_id = '${jobId}' AND NEW.kind = '${kind}' THEN RAISE EXCEPTION 'injected failure'; END IF;
      RETURN NEW;
    END $$`);
  await h.deps.db.query(`CREATE TRIGGER ${fn} BEFORE INSERT ON video_job_events FOR EACH ROW EXECUTE FUNCTION ${fn}()`);
  return async () => {
    await h.deps.db.query(`DROP TRIGGER ${fn} ON video_job_events`);
    await h.deps.db.query(`DROP FUNCTION ${fn}()`);
  };
}

/** The job's settlement as the workflow's activities do it: completed for 4 s, or failed. */
const complete = (job: { id: string; holdId: string }) =>
  endJob(
    h.deps.db,
    { jobId: job.id, holdId: job.holdId },
    { status: 'completed', chargeVnd: 4 * 3600, durationSeconds: 4 },
  );
const fail = (job: { id: string; holdId: string }) =>
  endJob(h.deps.db, { jobId: job.id, holdId: job.holdId }, { status: 'failed', message: 'no' });

test(
  'completion is one commit: a failed status change leaves money untouched; the retry charges once',
  async () => {
    const acc = await h.account(BALANCE);
    const job = await heldJob(acc.accountId);
    const restore = await failStatusChange(job.id, 'completed');
    try {
      await expect(complete(job)).rejects.toThrow(/injected/);
    } finally {
      await restore();
    }
    expect((await getJob(h.deps.db, job.id))!.status).toBe('submitted');
    expect(await getBalance(h.deps.db, acc.accountId)).toEqual({
      balance: BALANCE,
      held: 5 * 3600,
      available: BALANCE - 5 * 3600,
    });
    expect((await listLedger(h.deps.db, acc.accountId)).map((e) => e.kind)).toEqual(['hold_placed', 'topped_up']);

    expect(await complete(job)).toBe(true);
    expect(await complete(job)).toBe(false);
    expect((await getJob(h.deps.db, job.id))!).toMatchObject({ status: 'completed', costVnd: 4 * 3600 });
    expect(await getBalance(h.deps.db, acc.accountId)).toEqual({
      balance: BALANCE - 4 * 3600,
      held: 0,
      available: BALANCE - 4 * 3600,
    });
    expect((await listLedger(h.deps.db, acc.accountId)).filter((e) => e.kind === 'charged')).toHaveLength(1);
    expect(await verifyProjections(h.deps.db)).toEqual([]);
  },
  WORKFLOW_TEST_MS,
);

test(
  'a failure is one commit too, and a job already final is never settled again',
  async () => {
    const acc = await h.account(BALANCE);
    const job = await heldJob(acc.accountId);
    const restore = await failStatusChange(job.id, 'failed');
    try {
      await expect(fail(job)).rejects.toThrow(/injected/);
    } finally {
      await restore();
    }
    expect((await getBalance(h.deps.db, acc.accountId))!.held).toBe(5 * 3600);
    expect(await fail(job)).toBe(true);
    // A late completion of a failed job (a stale activity) charges nothing.
    expect(await complete(job)).toBe(false);
    expect(await getBalance(h.deps.db, acc.accountId)).toEqual({ balance: BALANCE, held: 0, available: BALANCE });
    expect((await getJob(h.deps.db, job.id))!.status).toBe('failed');
  },
  WORKFLOW_TEST_MS,
);

test(
  "the deadline runs from the job's creation: a job started past it expires, never submitted",
  async () => {
    const acc = await h.account(BALANCE);
    const id = randomUUID();
    // What POST /v1/videos commits before the workflow starts; the API then "crashes" and the job waits an hour.
    await createJobWithHold(h.deps.db, {
      id,
      accountId: acc.accountId,
      apiKeyId: null,
      model: VEO,
      provider: 'emulator-veo',
      requestHash: 'x',
      idempotencyKey: null,
      request: { prompt: 'an hour late', seconds: 4, returnLastFrame: false, images: {} },
      seconds: 4,
      pricePerSecond: 10400,
      maxCostVnd: 4 * 10400,
      holdId: randomUUID(),
    });
    await h.deps.db.query(`UPDATE video_jobs SET created_at = now() - interval '1 hour' WHERE id = $1`, [id]);
    // The reconciler starts the workflow: the deadline (2 min here) passed long ago.
    const job = await eventually(async () => {
      const j = await getJob(h.deps.db, id);
      return j?.status === 'expired' ? j : null;
    });
    expect(job).toMatchObject({
      errorCode: 'deadline_exceeded',
      providerTaskId: null,
      errorMessage: expect.stringContaining("of the job's creation"),
    });
    expect(
      h.emulator.control.requests.filter((r) => r.method === 'POST' && JSON.stringify(r.body).includes('an hour late')),
    ).toEqual([]);
    expect(await getBalance(h.deps.db, acc.accountId)).toEqual({ balance: BALANCE, held: 0, available: BALANCE });
  },
  WORKFLOW_TEST_MS,
);

test(
  "a workflow restarted after its history is lost keeps the job's deadline, not a new one",
  async () => {
    const acc = await h.account(BALANCE);
    const job = await h.submit(acc.key, { model: VEO, prompt: 'lost and late [hang]', seconds: 4 });
    await eventually(async () => (await getJob(h.deps.db, job.id))?.providerTaskId);
    // The job is now older than its deadline (2 min here); its running workflow computed its own deadline already.
    await h.deps.db.query(`UPDATE video_jobs SET created_at = now() - interval '1 hour' WHERE id = $1`, [job.id]);
    const handle = h.deps.temporal!.workflow.getHandle(`video-${job.id}`);
    await h.deps.temporal!.workflowService.deleteWorkflowExecution({
      namespace: h.config.temporalNamespace,
      workflowExecution: { workflowId: handle.workflowId },
    });
    // The reconciler starts it again (grace 1 s): it expires at its first look, before a fresh deadline could pass.
    const lostAt = Date.now();
    const done = await eventually(async () => {
      const j = await getJob(h.deps.db, job.id);
      return j?.status === 'expired' ? j : null;
    });
    expect(done.errorCode).toBe('deadline_exceeded');
    expect(Date.now() - lostAt).toBeLessThan(h.config.video.deadlineMs);
    // Veo cannot cancel; the follow window (from creation too) has closed: the task is recorded as still running.
    const ended = await eventually(async () =>
      (await listEvents(h.deps.db, job.id)).find((e) => e.kind === 'provider_task_ended'),
    );
    expect(ended.data).toMatchObject({ taskId: done.providerTaskId, state: 'running' });
    expect(await getBalance(h.deps.db, acc.accountId)).toEqual({ balance: BALANCE, held: 0, available: BALANCE });
  },
  WORKFLOW_TEST_MS,
);

test(
  'input images stored for a job are removed when its submission fails (the provider rejects it)',
  async () => {
    const acc = await h.account(BALANCE);
    const png = fs.readFileSync(path.join(__dirname, '../../emulator/fixtures/last_frame.png'));
    const job = await h.submit(acc.key, {
      model: SEEDANCE,
      prompt: 'refused [reject]',
      seconds: 5,
      input_reference: `data:image/png;base64,${png.toString('base64')}`,
    });
    const key = (await getJob(h.deps.db, job.id))!.request.images.inputReference!.key;
    const done = await eventually(async () => {
      const j = await getJob(h.deps.db, job.id);
      return j?.status === 'failed' ? j : null;
    });
    expect(done.errorCode).toBe('ProviderRejected');
    await eventually(async () => (await h.deps.storage.head(key)) === null);
    expect(await getBalance(h.deps.db, acc.accountId)).toEqual({ balance: BALANCE, held: 0, available: BALANCE });
  },
  WORKFLOW_TEST_MS,
);

test(
  'the last frame is stored and served with the type its bytes have: PNG, JPEG or WebP',
  async () => {
    const acc = await h.account(BALANCE);
    const fixture = (file: string) => fs.readFileSync(path.join(__dirname, '../../emulator/fixtures', file));
    const cases = [
      { marker: '', file: 'last_frame.png', type: 'image/png', ext: 'png' },
      { marker: '[last_frame=jpeg]', file: 'last_frame.jpg', type: 'image/jpeg', ext: 'jpg' },
      { marker: '[last_frame=webp]', file: 'last_frame.webp', type: 'image/webp', ext: 'webp' },
    ];
    const first = `data:image/png;base64,${fixture('last_frame.png').toString('base64')}`;
    const jobs = await Promise.all(
      cases.map((c) =>
        h.submit(acc.key, {
          model: SEEDANCE,
          prompt: `a lighthouse ${c.marker}`,
          seconds: 5,
          input_reference: first,
          return_last_frame: true,
        }),
      ),
    );
    for (const [i, c] of cases.entries()) {
      const done = await eventually(async () => {
        const j = await getJob(h.deps.db, jobs[i].id);
        return j?.status === 'completed' ? j : null;
      });
      const stored = await h.deps.storage.head(done.lastFrameKey!);
      expect({ type: c.type, db: done.lastFrameContentType, storage: stored?.contentType }).toEqual({
        type: c.type,
        db: c.type,
        storage: c.type,
      });
      const r = await h.api(acc.key, `/v1/videos/${done.id}/content?variant=last_frame`);
      expect({
        status: r.status,
        type: r.headers.get('content-type'),
        disposition: r.headers.get('content-disposition'),
      }).toEqual({ status: 200, type: c.type, disposition: `inline; filename="${done.id}-last-frame.${c.ext}"` });
      expect(Buffer.from(await r.arrayBuffer()).equals(fixture(c.file))).toBe(true);
    }
  },
  WORKFLOW_TEST_MS,
);

test(
  'a video longer than its hold: the rest from free funds, what they cannot cover a shortfall',
  async () => {
    // 5 s held (18,000 VND); the provider reports 12 s (43,200 VND). 12,000 VND are free: 30,000 is charged and
    // 13,200 recorded as uncollected, on the job and in the ledger, as a synchronous request's bill would be.
    const acc = await h.account(30_000);
    const job = await h.submit(acc.key, { model: SEEDANCE, prompt: 'a long boat [duration=12]', seconds: 5 });
    const done: Json = await h.final(acc.key, job.id);
    expect(done).toMatchObject({ status: 'completed', usage: { duration_seconds: 12, cost_vnd: 30_000 } });
    expect(await getBalance(h.deps.db, acc.accountId)).toEqual({ balance: 0, held: 0, available: 0 });
    const uncollected = (await listLedger(h.deps.db, acc.accountId, 100)).filter((e) => e.kind === 'uncollected');
    expect(uncollected).toMatchObject([{ amount: 13_200, refType: 'video_job', refId: job.id }]);
    const row = await h.deps.db.query('SELECT cost_vnd, shortfall_vnd FROM video_jobs WHERE id = $1', [job.id]);
    expect(row.rows[0]).toEqual({ cost_vnd: 30_000, shortfall_vnd: 13_200 });
    const verified = await verifyUsage(h.deps.db);
    expect(verified.mismatches.filter((m) => m.id === job.id)).toEqual([]);
    expect(await verifyProjections(h.deps.db)).toEqual([]);
  },
  WORKFLOW_TEST_MS,
);

test(
  'a submit attempt that lost the race to its retry: its task a job event, cancelled at the provider',
  async () => {
    // Two attempts of submitVideo run at once, as when Temporal retries an attempt that timed out while its create
    // request was still at the provider: the slow one's task comes second and is not the job's.
    const acc = await h.account(BALANCE);
    const job = await heldJob(acc.accountId);
    const providers = new VideoProviders(h.deps.catalog);
    try {
      const acts = createVideoActivities({
        db: h.deps.db,
        storage: h.deps.storage,
        catalog: h.deps.catalog,
        providers,
      });
      const create = 'POST /seedance/api/v3/contents/generations/tasks';
      h.emulator.control.addFault({ match: create, delayMs: 1500, times: 1 });
      const run = () =>
        new MockActivityEnvironment().run(acts.submitVideo, { jobId: job.id }) as ReturnType<typeof acts.submitVideo>;
      const [a, b] = await Promise.all([run(), run()]);
      const kept = (await getJob(h.deps.db, job.id))!.providerTaskId!;
      expect([a.taskId, b.taskId]).toEqual([kept, kept]);
      const created = h.emulator.control.requests.filter((r) => `${r.method} ${r.path}` === create);
      expect(created).toHaveLength(2);
      const events = await listEvents(h.deps.db, job.id);
      const dup = events.find((e) => e.kind === 'provider_task_duplicate')!;
      expect(dup.data).toMatchObject({ provider: 'emulator-seedance', kept });
      const twin = dup.data.taskId as string;
      expect(twin).not.toBe(kept);
      expect(events.filter((e) => e.kind === 'provider_task_cancelled').map((e) => e.data)).toEqual([
        { taskId: twin, duplicate: true },
      ]);
      const task = (await (
        await fetch(`${h.emulator.url}/seedance/api/v3/contents/generations/tasks/${twin}`)
      ).json()) as Json;
      expect(task.status).toBe('cancelled');
    } finally {
      await providers.close();
    }
  },
  WORKFLOW_TEST_MS,
);

test(
  "a Veo twin (no cancel there) is followed to its end: its cost is the gateway's, the customer is charged once",
  async () => {
    const acc = await h.account(BALANCE);
    // Held as POST /v1/videos holds a Veo job without a size (at the highest price of its table), with the table:
    // the twin and the job are each priced at what the provider delivered (720p, with audio), not at the hold price.
    const held = holdPerSecond(VEO, { input: 'text' });
    const price = chargePerSecond(VEO, { resolution: '720p', audio: true });
    expect(price).toBeLessThan(held);
    const job = await heldJob(acc.accountId, {
      model: VEO,
      provider: 'emulator-veo',
      seconds: 4,
      price: held,
      prompt: 'twin sunrise [polls=4]',
      pricing: catalogPricing(VEO),
    });
    const providers = new VideoProviders(h.deps.catalog);
    try {
      const acts = createVideoActivities({
        db: h.deps.db,
        storage: h.deps.storage,
        catalog: h.deps.catalog,
        providers,
      });
      h.emulator.control.addFault({ match: 'POST /veo/v1beta/models/', delayMs: 1500, times: 1 });
      const run = () =>
        new MockActivityEnvironment().run(acts.submitVideo, { jobId: job.id }) as ReturnType<typeof acts.submitVideo>;
      await Promise.all([run(), run()]);
    } finally {
      await providers.close();
    }
    const dup = (await listEvents(h.deps.db, job.id)).find((e) => e.kind === 'provider_task_duplicate')!;
    const twin = dup.data.taskId as string;
    // The worker's sweep follows the twin (Veo cannot cancel it) until the provider says it ended.
    const ended = await eventually(async () =>
      (await listEvents(h.deps.db, job.id)).find((e) => e.kind === 'provider_task_ended' && e.data.taskId === twin),
    );
    expect(ended.data).toEqual({
      taskId: twin,
      state: 'succeeded',
      // Veo reports what it delivered: the twin's cost is priced at it.
      durationSeconds: 4,
      resolution: '720p',
      generateAudio: true,
      duplicate: true,
      gatewayCostVnd: 4 * price,
    });
    expect((await eventKinds(job.id)).filter((k) => k === 'provider_task_cancelled')).toEqual([]);
    expect(await gatewayCostsOf(job.id)).toEqual([
      {
        cause: 'video_twin',
        deployment: dup.data.deployment,
        cost_vnd: 4 * price,
        units: { video_seconds: 4 },
        account_id: acc.accountId,
      },
    ]);
    // The job itself runs on its own task (the reconciler starts its workflow): one charge, for one video.
    const done = await eventually(async () => {
      const j = await getJob(h.deps.db, job.id);
      return j?.status === 'completed' ? j : null;
    });
    expect(done.providerTaskId).not.toBe(twin);
    expect(done.costVnd).toBe(4 * price);
    const charged = (await listLedger(h.deps.db, acc.accountId, 100)).filter((e) => e.kind === 'charged');
    expect(charged.map((e) => e.amount)).toEqual([4 * price]);
    expect(await getBalance(h.deps.db, acc.accountId)).toEqual({
      balance: BALANCE - 4 * price,
      held: 0,
      available: BALANCE - 4 * price,
    });
    // The twin's media is never fetched.
    const twinOp = twin.split('/').pop()!;
    expect(
      h.emulator.control.requests.filter((r) => r.method === 'GET' && r.path.includes(`/files/${twinOp}`)),
    ).toEqual([]);
    expect(await verifyProjections(h.deps.db)).toEqual([]);
  },
  WORKFLOW_TEST_MS,
);
