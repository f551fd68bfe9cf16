import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { eventually, startVideoHarness, type VideoHarness } from '../support/video';
import { testServiceAccount } from '../support/cloudCredentials';
import { VertexVeoAdapter } from '../../src/providers/vertex/veo';
import { WORKFLOW_TEST_MS } from '../support/budgets';

/**
 * Veo on Vertex AI as a video provider: predictLongRunning then fetchPredictOperation with the service account's
 * OAuth token, the video returned inline; a whole job through /v1/videos on the real Temporal worker, and the
 * adapter's outcomes (failure without the project's path, content filter) against the emulator.
 */

const PROJECT = 'emu-veo-project';
const sa = testServiceAccount(`veo@${PROJECT}.iam.gserviceaccount.com`);
let h: VideoHarness;
beforeAll(async () => {
  process.env.VEO_SA_KEY = sa.keyPath;
  const catalog = {
    providers: {
      gcp: {
        kind: 'vertex',
        project: PROJECT,
        region: 'us-central1',
        baseUrl: '${EMULATOR_URL}/vertex',
        credentialsFileEnv: 'VEO_SA_KEY',
        timeoutMs: 5000,
      },
    },
    models: [
      {
        id: 'veo-vertex',
        mode: 'video',
        provider: 'gcp',
        upstreamModel: 'veo-3.1-generate-preview',
        pricing: { perVideoSecond: 10400 },
        allowedDurations: [4, 6, 8],
        defaultDuration: 8,
        family: 'veo',
      },
    ],
  };
  const catalogPath = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'gw-vertex-veo-')), 'catalog.json');
  fs.writeFileSync(catalogPath, JSON.stringify(catalog));
  h = await startVideoHarness({}, { catalogPath });
  sa.install(h.emulator);
});
afterAll(async () => {
  await h?.close();
  delete process.env.VEO_SA_KEY;
});

test(
  'a video job on Veo on Vertex completes and serves the inline video, billed per second',
  async () => {
    const acc = await h.account(1_000_000);
    const auth = { authorization: `Bearer ${acc.key}` };
    const r = await fetch(`${h.url}/v1/videos`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'veo-vertex', prompt: 'a boat at dawn', seconds: 8 }),
    });
    expect(r.status).toBe(202);
    const { id } = (await r.json()) as { id: string };
    const done = await eventually(async () => {
      const j = (await (await fetch(`${h.url}/v1/videos/${id}`, { headers: auth })).json()) as {
        status: string;
        usage?: { cost_vnd: number };
      };
      return ['completed', 'failed', 'expired'].includes(j.status) ? j : null;
    });
    expect(done.status).toBe('completed');
    expect(done.usage!.cost_vnd).toBe(8 * 10400);
    const content = await fetch(`${h.url}/v1/videos/${id}/content`, { headers: auth });
    expect(content.status).toBe(200);
    expect((await content.arrayBuffer()).byteLength).toBe(h.emulator.control.settings.videoBytes);
    const calls = h.emulator.control.requests.filter((q) => q.path.startsWith(`/vertex/v1/projects/${PROJECT}/`));
    const location = `/vertex/v1/projects/${PROJECT}/locations/us-central1`;
    const model = `${location}/publishers/google/models/veo-3.1-generate-preview`;
    expect(calls[0].path).toBe(`${model}:predictLongRunning`);
    expect(calls.slice(1).every((q) => q.path.endsWith(':fetchPredictOperation'))).toBe(true);
    expect(calls.every((q) => /^Bearer ya29\.emu-/.test(String(q.headers.authorization)))).toBe(true);
  },
  WORKFLOW_TEST_MS,
);

test(
  'the adapter reports failures without the project path, and the safety filter as content filtered',
  async () => {
    const cfg = h.deps.catalog.providers.get('gcp')!;
    const veo = new VertexVeoAdapter(cfg);
    const run = async (prompt: string) => {
      const { taskId } = await veo.submit({ upstreamModel: 'veo-3.1-generate-preview', prompt, seconds: 8 } as never);
      expect(taskId).toMatch(/\/publishers\/google\/models\/veo-3\.1-generate-preview\/operations\//);
      return eventually(async () => {
        const s = await veo.poll(taskId);
        return s.state === 'running' ? null : s;
      });
    };
    const failed = await run('it breaks [fail]');
    expect(failed).toMatchObject({ state: 'failed' });
    expect(await run('blocked [filter]')).toMatchObject({ state: 'failed', contentFiltered: true });
    h.emulator.control.addFault({ match: ':predictLongRunning', status: 400, times: 1 });
    const refused = await veo
      .submit({ upstreamModel: 'veo-3.1-generate-preview', prompt: 'x', seconds: 8 } as never)
      .catch((e) => e);
    expect(refused.retryable).toBe(false);
    expect(refused.message).not.toContain(PROJECT);
    await veo.close();
  },
  WORKFLOW_TEST_MS,
);
