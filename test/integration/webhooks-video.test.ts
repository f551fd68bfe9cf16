import OpenAI from 'openai';
import { randomUUID } from 'node:crypto';
import { DAY_MS } from '../../src/jobs/webhooks/settings';
import { eventually, startVideoHarness, type VideoHarness } from '../support/video';
import { startReceiver, type Receiver } from '../support/webhookReceiver';

/**
 * Video jobs announce their transitions: the real gateway, worker, Temporal dev server and emulator, with a
 * receiver over real HTTP. Each transition arrives exactly once, after it committed (the job reads as the event
 * says), verified by the openai SDK; GET /v1/videos/{id} keeps its shape.
 */

const VEO = 'veo-3.1-generate-preview';
const SEEDANCE = 'seedance-2-0';
const openai = new OpenAI({ apiKey: 'unused' });

let h: VideoHarness;
let rx: Receiver;
beforeAll(async () => {
  h = await startVideoHarness(
    { deadlineMs: 12_000 },
    {
      webhooks: {
        allowPrivateUrls: true,
        timeoutMs: 2_000,
        retry: { initialMs: 100, maxMs: 500, windowMs: 60_000 },
        maxEndpoints: 20,
        rotationGraceMs: DAY_MS,
      },
    },
  );
  rx = await startReceiver();
});
afterAll(async () => {
  await h?.close();
  await rx?.close();
});

type Json = any;
const api = async (key: string, method: string, path: string, body?: unknown): Promise<Json> =>
  (
    await fetch(`${h.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    })
  ).json();

/** The events the receiver got at `path`, each verified with the endpoint's secret by the openai SDK. */
async function eventsAt(path: string, secret: string): Promise<Json[]> {
  return Promise.all(
    rx.received.filter((r) => r.path === path).map((r) => openai.webhooks.unwrap(r.body, r.headers, secret)),
  );
}

async function jobWithEndpoint(model: string, prompt: string, seconds: number) {
  const acc = await h.account(1_000_000);
  const path = `/hook-${randomUUID()}`;
  const ep = await api(acc.key, 'POST', '/v1/webhooks', { url: `${rx.url}${path}` });
  const job = await api(acc.key, 'POST', '/v1/videos', { model, prompt, seconds });
  return { acc, path, secret: ep.secret as string, job };
}

test('a completed job sends video.processing then video.completed, once each, after each committed', async () => {
  const { acc, path, secret, job } = await jobWithEndpoint(VEO, 'a calm lake [polls=3]', 4);
  const events = await eventually(async () => {
    const e = await eventsAt(path, secret);
    return e.some((x) => x.type === 'video.completed') ? e : null;
  });
  const got: Json = await api(acc.key, 'GET', `/v1/videos/${job.id}`);
  expect(got.status).toBe('completed');
  // Webhooks add nothing to the shape of GET /v1/videos/{id}.
  expect(Object.keys(got).sort()).toEqual([
    'completed_at',
    'created_at',
    'id',
    'model',
    'object',
    'result',
    'status',
    'usage',
  ]);
  await new Promise((r) => setTimeout(r, 1_000)); // no late duplicates
  const all = await eventsAt(path, secret);
  expect(all.map((e) => e.type).sort()).toEqual(['video.completed', 'video.processing']);
  for (const e of all)
    expect(e).toMatchObject({ object: 'event', data: { id: job.id }, id: expect.stringMatching(/^evt_/) });
  expect(events.find((e) => e.type === 'video.completed').created_at).toBeGreaterThanOrEqual(
    events.find((e) => e.type === 'video.processing').created_at,
  );
  // Committed before it was announced: the job's events table has the transition before the webhook event row.
  const order = await h.deps.db.query(
    `SELECT (SELECT created_at FROM video_job_events WHERE job_id = $1 AND kind = 'completed') <=
            (SELECT created_at FROM webhook_events WHERE account_id = $2 AND type = 'video.completed') AS ok`,
    [job.id, acc.accountId],
  );
  expect(order.rows[0].ok).toBe(true);
}, 60_000);

test.each([
  ['video.failed', VEO, 'a failing job [fail]', 'failed'],
  ['video.expired', VEO, 'a job that never ends [hang]', 'expired'],
])(
  '%s is sent when the job ends that way',
  async (type, model, prompt, status) => {
    const { acc, path, secret, job } = await jobWithEndpoint(model, prompt, 4);
    const events = await eventually(async () => {
      const e = await eventsAt(path, secret);
      return e.some((x) => x.type === type) ? e : null;
    });
    expect((await api(acc.key, 'GET', `/v1/videos/${job.id}`)).status).toBe(status);
    expect(events.filter((e) => e.type === type)).toEqual([expect.objectContaining({ data: { id: job.id } })]);
    expect(events.some((e) => e.type === 'video.completed')).toBe(false);
  },
  60_000,
);

test('a DELETE sends video.cancelled (the job reads failed with code cancelled, as before)', async () => {
  const { acc, path, secret, job } = await jobWithEndpoint(SEEDANCE, 'cancel me [polls=1000]', 5);
  await eventually(async () => (await eventsAt(path, secret)).some((e) => e.type === 'video.processing'));
  await fetch(`${h.url}/v1/videos/${job.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${acc.key}` } });
  const events = await eventually(async () => {
    const e = await eventsAt(path, secret);
    return e.some((x) => x.type === 'video.cancelled') ? e : null;
  });
  expect(await api(acc.key, 'GET', `/v1/videos/${job.id}`)).toMatchObject({
    status: 'failed',
    error: { code: 'cancelled' },
  });
  expect(events.map((e) => e.type).sort()).toEqual(['video.cancelled', 'video.processing']);
}, 60_000);
