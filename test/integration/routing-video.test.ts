import { listLedger } from '../../src/billing/ledger';
import { getJob, listEvents } from '../../src/jobs/video/repo';
import { writeRoutingCatalog } from '../support/routingCatalog';
import { eventually, startVideoHarness, type VideoHarness } from '../support/video';
import { startWorker } from '../../src/worker';
import { freePort } from '../support/http';
import { WORKFLOW_TEST_MS } from '../support/budgets';
import { workflowCodePath } from '../support/workflowCode';

/**
 * Video submission falls back to another deployment of the same model when the first refuses it transiently
 * (here a 503); the job records the deployment that accepted the task, and polling and copying go to that one only.
 * The worker's routing counters are on its own GET /metrics (WORKER_METRICS_PORT). Real Temporal worker, emulated
 * Seedance over HTTP.
 */

/** A port nothing listens on now (the worker binds it a moment later). */
let h: VideoHarness;
beforeAll(async () => {
  const catalogPath = await writeRoutingCatalog([
    {
      id: 'v-seed',
      mode: 'video',
      kind: 'seedance',
      upstreamModel: 'dreamina-seedance-2-0-260128',
      pricing: { perVideoSecond: 3600 },
      video: { allowedDurations: [4, 5], defaultDuration: 5, family: 'seedance' },
      deployments: [{ id: 'v-seed-a' }, { id: 'v-seed-b' }],
    },
  ]);
  h = await startVideoHarness({}, { catalogPath, host: '127.0.0.1', workerMetricsPort: await freePort() });
});
afterAll(async () => {
  await h?.close();
});

async function submitAndFinish(key: string): Promise<string> {
  const r = await fetch(`${h.url}/v1/videos`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'v-seed', prompt: 'a boat', seconds: 4 }),
  });
  expect(r.status).toBe(202);
  const { id } = (await r.json()) as { id: string };
  const done = await eventually(async () => {
    const j = (await (
      await fetch(`${h.url}/v1/videos/${id}`, { headers: { authorization: `Bearer ${key}` } })
    ).json()) as { status: string };
    return ['completed', 'failed', 'expired'].includes(j.status) ? j : null;
  });
  expect(done.status).toBe('completed');
  return id;
}

test(
  'a submission refused by one deployment is accepted by the other, which then serves the whole job',
  async () => {
    const acc = await h.account(1_000_000);
    h.emulator.control.addFault({ deployment: 'v-seed-a', match: 'POST ', status: 503, times: 1 });
    const r = await fetch(`${h.url}/v1/videos`, {
      method: 'POST',
      headers: { authorization: `Bearer ${acc.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'v-seed', prompt: 'a boat', seconds: 4 }),
    });
    expect(r.status).toBe(202);
    const { id } = (await r.json()) as { id: string };
    const done = await eventually(async () => {
      const j = (await (
        await fetch(`${h.url}/v1/videos/${id}`, { headers: { authorization: `Bearer ${acc.key}` } })
      ).json()) as { status: string; usage?: { cost_vnd: number } };
      return ['completed', 'failed', 'expired'].includes(j.status) ? j : null;
    });
    expect(done.status).toBe('completed');
    expect(h.emulator.control.faultsApplied).toBe(1); // the first deployment was tried and refused it
    expect((await getJob(h.deps.db, id))!.deployment).toBe('v-seed-b');
    const submitted = (await listEvents(h.deps.db, id)).find((e) => e.kind === 'provider_submitted');
    expect(submitted?.data).toMatchObject({ deployment: 'v-seed-b' });
    // Every task request the emulator served (create, polls) went to the accepting deployment.
    const taskRequests = h.emulator.control.requests.filter((q) => q.path.includes('/contents/generations/tasks'));
    expect(taskRequests.length).toBeGreaterThan(1);
    expect(new Set(taskRequests.map((q) => q.headers['x-emulator-deployment']))).toEqual(new Set(['v-seed-b']));
    const charges = (await listLedger(h.deps.db, acc.accountId)).filter((e) => e.kind === 'charged');
    expect(charges.map((c) => c.amount)).toEqual([done.usage!.cost_vnd]);
    // The worker's own metrics count the submission's tries: a server failure and a cooldown on -a, a retry on -b.
    expect(h.worker!.metricsUrl).toBe(`http://127.0.0.1:${h.config.workerMetricsPort}/metrics`);
    const metrics = await (await fetch(h.worker!.metricsUrl!)).text();
    const sample = (name: string, labels: string) =>
      Number(new RegExp(`^${name}\\{${labels}\\} (\\d+)$`, 'm').exec(metrics)?.[1] ?? NaN);
    expect(sample('gateway_deployment_requests_total', 'model="v-seed",deployment="v-seed-a"')).toBe(1);
    expect(sample('gateway_deployment_requests_total', 'model="v-seed",deployment="v-seed-b"')).toBe(1);
    expect(sample('gateway_deployment_failures_total', 'model="v-seed",deployment="v-seed-a",class="server"')).toBe(1);
    expect(sample('gateway_deployment_cooldowns_total', 'model="v-seed",deployment="v-seed-a"')).toBe(1);
    expect(sample('gateway_deployment_retries_total', 'model="v-seed",deployment="v-seed-b"')).toBe(1);
    expect(metrics).not.toMatch(/gateway_deployment_failures_total\{[^}]*deployment="v-seed-b"/);
    expect(metrics).toContain('process_cpu_user_seconds_total');
    expect((await fetch(h.worker!.metricsUrl!.replace('/metrics', '/other'))).status).toBe(404);
  },
  WORKFLOW_TEST_MS,
);

test("a worker in the API's process (npm start) counts its submissions on the API's /metrics", async () => {
  await h.worker!.close();
  h.worker = await startWorker(h.config, { router: h.deps.router, workflowCodePath: await workflowCodePath() });
  expect(h.worker.metricsUrl).toBeNull(); // no port of its own
  const acc = await h.account(1_000_000);
  h.emulator.control.reset();
  h.emulator.control.addFault({ deployment: 'v-seed-a', match: 'POST ', status: 503, times: 1 });
  const id = await submitAndFinish(acc.key);
  expect((await getJob(h.deps.db, id))!.deployment).toBe('v-seed-b');
  const metrics = await (await fetch(`${h.url}/metrics`)).text();
  expect(metrics).toContain('gateway_deployment_failures_total{model="v-seed",deployment="v-seed-a",class="server"} 1');
  expect(metrics).toContain('gateway_deployment_retries_total{model="v-seed",deployment="v-seed-b"} 1');
});
