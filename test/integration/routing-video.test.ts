import { listLedger } from '../../src/billing/ledger';
import { getJob, listEvents } from '../../src/video/jobs';
import { writeRoutingCatalog } from '../support/routingCatalog';
import { eventually, startVideoHarness, type VideoHarness } from '../support/video';

/**
 * Video submission falls back to another deployment of the same model when the first refuses it transiently
 * (here a 503); the job records the deployment that accepted the task, and polling and copying go to that one only.
 * Real Temporal worker, emulated Seedance over HTTP.
 */

let h: VideoHarness;
beforeAll(async () => {
  const catalogPath = await writeRoutingCatalog([{
    id: 'v-seed', mode: 'video', kind: 'seedance', upstreamModel: 'dreamina-seedance-2-0-260128', pricing: { perVideoSecond: 3600 },
    video: { allowedDurations: [4, 5], defaultDuration: 5, family: 'seedance' },
    deployments: [{ id: 'v-seed-a' }, { id: 'v-seed-b' }],
  }]);
  h = await startVideoHarness({}, { catalogPath });
});
afterAll(async () => {
  await h?.close();
});

test('a submission refused by one deployment is accepted by the other, which then serves the whole job', async () => {
  const acc = await h.account(1_000_000);
  h.emulator.control.addFault({ deployment: 'v-seed-a', match: 'POST ', status: 503, times: 1 });
  const r = await fetch(`${h.url}/v1/videos`, { method: 'POST', headers: { authorization: `Bearer ${acc.key}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'v-seed', prompt: 'a boat', seconds: 4 }) });
  expect(r.status).toBe(202);
  const { id } = await r.json() as { id: string };
  const done = await eventually(async () => {
    const j = await (await fetch(`${h.url}/v1/videos/${id}`, { headers: { authorization: `Bearer ${acc.key}` } })).json() as { status: string; usage?: { cost_vnd: number } };
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
});
