import OpenAI, { InvalidWebhookSignatureError } from 'openai';
import { randomUUID } from 'node:crypto';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { projectRoot } from '../../src/projectRoot';
import { createWebhookActivities } from '../../src/jobs/webhooks/activities';
import { sendWebhook } from '../../src/jobs/webhooks/send';
import { recordEvent } from '../../src/jobs/webhooks/repo';
import { reconcileDeliveries, type DeliveryReconcileCursor } from '../../src/jobs/webhooks/reconciler';
import { DAY_MS } from '../../src/jobs/webhooks/settings';
import { eventually, startVideoHarness, type VideoHarness } from '../support/video';
import { startReceiver, type Receiver } from '../support/webhookReceiver';
import { WORKFLOW_TEST_MS } from '../support/budgets';

/**
 * Webhook delivery against the real Temporal dev server, Postgres and a receiver over real HTTP: every delivery is
 * accepted by the openai SDK's webhooks.unwrap; timeouts, dropped connections, 429 and 5xx are retried with the
 * same webhook-id; other answers are final; the retry window ends a delivery; resends and deletions take effect.
 */

const openai = new OpenAI({ apiKey: 'unused' });
const RETRY = { initialMs: 100, maxMs: 400, windowMs: 60_000 };

let h: VideoHarness;
let rx: Receiver;
let emit: ReturnType<typeof createWebhookActivities>['emitWebhookEvent'];
beforeAll(async () => {
  h = await startVideoHarness(
    {},
    { webhooks: { allowPrivateUrls: true, timeoutMs: 1_000, retry: RETRY, maxEndpoints: 20, rotationGraceMs: DAY_MS } },
  );
  rx = await startReceiver();
  emit = createWebhookActivities({
    db: h.deps.db,
    temporal: h.deps.temporal!,
    taskQueue: h.config.temporalTaskQueue,
    settings: h.config.webhooks,
  }).emitWebhookEvent;
});
afterAll(async () => {
  await h?.close();
  await rx?.close();
});

type Json = any;
async function api(key: string, method: string, path: string, body?: unknown): Promise<Json> {
  const res = await fetch(`${h.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  return res.json();
}
/** An account with one endpoint at the receiver under `path`. */
async function endpoint(path: string, events?: string[]) {
  const acc = await h.account(0);
  const ep = await api(acc.key, 'POST', '/v1/webhooks', { url: `${rx.url}${path}`, ...(events ? { events } : {}) });
  return { ...acc, endpointId: ep.id as string, secret: ep.secret as string };
}
const at = (path: string) => rx.received.filter((r) => r.path === path);
const delivery = async (endpointId: string) =>
  (await h.deps.db.query('SELECT * FROM webhook_deliveries WHERE endpoint_id = $1', [endpointId])).rows;
const attempts = async (deliveryId: string) =>
  (
    await h.deps.db.query(
      'SELECT attempt, status_code, outcome FROM webhook_attempts WHERE delivery_id = $1 ORDER BY attempt',
      [deliveryId],
    )
  ).rows;

test(
  "an event arrives in OpenAI's shape, signed: the openai SDK's unwrap accepts it, rejects a forgery",
  async () => {
    const path = `/hook-${randomUUID()}`;
    const a = await endpoint(path);
    const jobId = randomUUID();
    const eventId = await emit({
      accountId: a.accountId,
      type: 'video.completed',
      data: { id: jobId },
      key: `video:${jobId}:completed`,
    });
    const [got] = await eventually(async () => (at(path).length ? at(path) : null));
    const event: Json = await openai.webhooks.unwrap(got.body, got.headers, a.secret);
    expect(event).toEqual({
      id: eventId,
      object: 'event',
      type: 'video.completed',
      created_at: expect.any(Number),
      data: { id: jobId },
    });
    expect(eventId).toMatch(/^evt_[0-9a-f]{32}$/);
    expect(Math.abs(event.created_at - Date.now() / 1000)).toBeLessThan(60);
    expect(got.headers['webhook-id']).toBe(eventId);
    expect(got.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    expect(got.headers['content-type']).toBe('application/json');

    const tampered = got.body.replace(jobId, randomUUID());
    await expect(openai.webhooks.unwrap(tampered, got.headers, a.secret)).rejects.toBeInstanceOf(
      InvalidWebhookSignatureError,
    );
    await expect(
      openai.webhooks.unwrap(got.body, { ...got.headers, 'webhook-id': 'evt_other' }, a.secret),
    ).rejects.toBeInstanceOf(InvalidWebhookSignatureError);
    const otherSecret = (await endpoint(`/unused-${randomUUID()}`)).secret;
    await expect(openai.webhooks.unwrap(got.body, got.headers, otherSecret)).rejects.toBeInstanceOf(
      InvalidWebhookSignatureError,
    );

    const [d] = await eventually(async () =>
      (await delivery(a.endpointId))[0]?.status === 'succeeded' ? delivery(a.endpointId) : null,
    );
    expect(d).toMatchObject({ attempts: 1, last_status_code: 200, next_attempt_at: null });
  },
  WORKFLOW_TEST_MS,
);

test(
  'an emission retried or replayed is one event and one delivery; endpoints get only their types',
  async () => {
    const path = `/hook-${randomUUID()}`;
    const a = await endpoint(path, ['video.failed']);
    const jobId = randomUUID();
    const key = `video:${jobId}:failed`;
    const ids = await Promise.all(
      [1, 2, 3].map(() => emit({ accountId: a.accountId, type: 'video.failed', data: { id: jobId }, key })),
    );
    expect(new Set(ids).size).toBe(1);
    await emit({
      accountId: a.accountId,
      type: 'video.completed',
      data: { id: jobId },
      key: `video:${jobId}:completed`,
    });
    await eventually(async () => at(path).length >= 1);
    await new Promise((r) => setTimeout(r, 1_000));
    expect(at(path).map((r) => JSON.parse(r.body).type)).toEqual(['video.failed']);
    expect(await delivery(a.endpointId)).toHaveLength(1);
    const n = await h.deps.db.query('SELECT count(*)::int AS n FROM webhook_events WHERE account_id = $1', [
      a.accountId,
    ]);
    expect(n.rows[0].n).toBe(2); // both events are recorded; only the subscribed one is delivered
  },
  WORKFLOW_TEST_MS,
);

test('timeouts, dropped connections, 429 and 5xx retried with backoff, same webhook-id; each verifies', async () => {
  const path = `/hook-${randomUUID()}`;
  const a = await endpoint(path);
  rx.script(500, 'hang', 'drop', { status: 429, retryAfter: '0' }, 503, 200);
  const jobId = randomUUID();
  const eventId = await emit({
    accountId: a.accountId,
    type: 'video.processing',
    data: { id: jobId },
    key: `video:${jobId}:processing`,
  });
  const [d] = await eventually(async () =>
    (await delivery(a.endpointId))[0]?.status === 'succeeded' ? delivery(a.endpointId) : null,
  );
  const tries = at(path);
  expect(tries).toHaveLength(6);
  expect(new Set(tries.map((t) => t.headers['webhook-id']))).toEqual(new Set([eventId]));
  expect(new Set(tries.map((t) => t.body)).size).toBe(1);
  for (const t of tries)
    expect(await openai.webhooks.unwrap(t.body, t.headers, a.secret)).toMatchObject({
      id: eventId,
      type: 'video.processing',
    });
  // Backoff: each wait at least the schedule's (100, 200, 400, 400, 400 ms), the hang adding its 1 s timeout.
  const gaps = tries.slice(1).map((t, i) => t.at - tries[i].at);
  [100, 200 + 1_000, 400, 400, 400].forEach((min, i) => expect(gaps[i]).toBeGreaterThanOrEqual(min - 20));
  expect(d).toMatchObject({ attempts: 6, last_status_code: 200, last_error: null });
  expect(await attempts(d.id)).toEqual([
    { attempt: 1, status_code: 500, outcome: 'retry' },
    { attempt: 2, status_code: null, outcome: 'retry' },
    { attempt: 3, status_code: null, outcome: 'retry' },
    { attempt: 4, status_code: 429, outcome: 'retry' },
    { attempt: 5, status_code: 503, outcome: 'retry' },
    { attempt: 6, status_code: 200, outcome: 'succeeded' },
  ]);
}, 60_000);

test(
  'another 4xx or a redirect is final after one try (the redirect not followed)',
  async () => {
    for (const reply of [400, 410, { redirect: '/elsewhere' }] as const) {
      const path = `/hook-${randomUUID()}`;
      const a = await endpoint(path);
      rx.script(reply);
      const jobId = randomUUID();
      await emit({ accountId: a.accountId, type: 'video.failed', data: { id: jobId }, key: `video:${jobId}:failed` });
      const [d] = await eventually(async () =>
        (await delivery(a.endpointId))[0]?.status === 'failed' ? delivery(a.endpointId) : null,
      );
      await new Promise((r) => setTimeout(r, 600));
      expect(at(path)).toHaveLength(1);
      expect(rx.received.some((r) => r.path === '/elsewhere')).toBe(false);
      expect(d).toMatchObject({ attempts: 1, next_attempt_at: null });
      expect(d.last_error).toMatch(typeof reply === 'number' ? /^HTTP 4\d\d/ : /redirects are not followed/);
    }
  },
  WORKFLOW_TEST_MS,
);

test(
  "the console's view: deliveries list tries and next try; a resend sends the same event again",
  async () => {
    const path = `/hook-${randomUUID()}`;
    const a = await endpoint(path);
    rx.script(502);
    const jobId = randomUUID();
    const eventId = await emit({
      accountId: a.accountId,
      type: 'video.expired',
      data: { id: jobId },
      key: `video:${jobId}:expired`,
    });
    const list = await eventually(async () => {
      const l = await api(a.key, 'GET', `/v1/webhooks/${a.endpointId}/deliveries`);
      return l.data[0]?.status === 'succeeded' ? l : null;
    });
    expect(list.data).toEqual([
      expect.objectContaining({
        object: 'webhook_delivery',
        event_id: eventId,
        event_type: 'video.expired',
        subject_id: jobId,
        status: 'succeeded',
        attempts: 2,
        last_status_code: 200,
      }),
    ]);
    const resent = await api(a.key, 'POST', `/v1/webhooks/${a.endpointId}/deliveries/${list.data[0].id}/resend`);
    expect(resent).toMatchObject({ id: list.data[0].id, status: 'pending' });
    await eventually(async () => at(path).length === 3);
    expect(at(path)[2].headers['webhook-id']).toBe(eventId);
    await eventually(
      async () => (await api(a.key, 'GET', `/v1/webhooks/${a.endpointId}/deliveries`)).data[0].attempts === 3,
    );
    const other = await h.account(0);
    expect(
      (await api(other.key, 'POST', `/v1/webhooks/${a.endpointId}/deliveries/${list.data[0].id}/resend`)).error.code,
    ).toBe('webhook_not_found');
  },
  WORKFLOW_TEST_MS,
);

test("a delivery failing on stops at its retry window's end; deleting the endpoint stops its retries", async () => {
  const path = `/hook-${randomUUID()}`;
  const a = await endpoint(path);
  rx.always(503);
  try {
    // The retry window is fixed when the delivery starts: a short one for this delivery only.
    const short = createWebhookActivities({
      db: h.deps.db,
      temporal: h.deps.temporal!,
      taskQueue: h.config.temporalTaskQueue,
      settings: { ...h.config.webhooks, retry: { ...RETRY, windowMs: 3_000 } },
    });
    const jobId = randomUUID();
    await short.emitWebhookEvent({
      accountId: a.accountId,
      type: 'video.failed',
      data: { id: jobId },
      key: `video:${jobId}:failed`,
    });
    const [d] = await eventually(async () =>
      (await delivery(a.endpointId))[0]?.status === 'failed' ? delivery(a.endpointId) : null,
    );
    expect(d.attempts).toBeGreaterThanOrEqual(2);
    expect(d).toMatchObject({ last_status_code: 503, next_attempt_at: null });
    // The last try falls at the end of the window (counted from the start of the delivery), not before it.
    expect(at(path).at(-1)!.at - d.created_at.getTime()).toBeGreaterThanOrEqual(3_000);

    const b = await endpoint(`/hook-${randomUUID()}`);
    const job2 = randomUUID();
    await emit({ accountId: b.accountId, type: 'video.failed', data: { id: job2 }, key: `video:${job2}:failed` });
    await eventually(async () => (await delivery(b.endpointId))[0]?.attempts >= 2);
    await api(b.key, 'DELETE', `/v1/webhooks/${b.endpointId}`);
    const [gone] = await eventually(async () =>
      (await delivery(b.endpointId))[0]?.status === 'cancelled' ? delivery(b.endpointId) : null,
    );
    expect(gone.last_error).toBe('the endpoint was deleted');
  } finally {
    rx.always(200);
  }
}, 60_000);

describe('each try under the SSRF guard', () => {
  const send = (url: string, o: Partial<Parameters<typeof sendWebhook>[0]> = {}) =>
    sendWebhook({
      url,
      msgId: 'evt_x',
      payload: '{}',
      secrets: ['whsec_' + Buffer.alloc(32, 1).toString('base64')],
      timeoutMs: 2_000,
      allowPrivate: false,
      ...o,
    });

  test('a private address is refused at delivery time, also when a public name now resolves to one', async () => {
    const before = rx.received.length;
    expect(await send(`${rx.url}/ssrf`)).toMatchObject({
      outcome: 'failed',
      statusCode: null,
      error: expect.stringMatching(/not a public address \(loopback\)/),
    });
    const rebound = await send(`http://hooks.example.com:${new URL(rx.url).port}/ssrf`, {
      lookup: async () => [{ address: '127.0.0.1', family: 4 }],
    });
    expect(rebound).toMatchObject({ outcome: 'failed', error: expect.stringMatching(/not a public address/) });
    expect(rx.received.length).toBe(before);
  });

  test('an endless answer is read no further than 64 KB', async () => {
    rx.script('endless');
    const t0 = Date.now();
    expect(await send(`${rx.url}/endless`, { allowPrivate: true })).toMatchObject({
      outcome: 'succeeded',
      statusCode: 200,
    });
    expect(Date.now() - t0).toBeLessThan(1_500);
  });
});

test('the receiver example of docs/webhooks.md, run as written, accepts a delivery, refuses a forged one', async () => {
  const doc = fs.readFileSync(path.join(projectRoot(), 'docs', 'webhooks.md'), 'utf8');
  const code = /<!-- receiver-example -->\n```js\n([\s\S]*?)```/.exec(doc)![1];
  expect(code.trim().split('\n').length).toBeLessThanOrEqual(11);
  const file = path.join(os.tmpdir(), `receiver-${randomUUID()}.cjs`);
  fs.writeFileSync(file, code);
  const acc = await h.account(0);
  const port = 20_000 + Math.floor(Math.random() * 20_000);
  const ep = await api(acc.key, 'POST', '/v1/webhooks', { url: `http://127.0.0.1:${port}/` });
  const child = spawn(process.execPath, [file], {
    env: {
      ...process.env,
      GATEWAY_WEBHOOK_SECRET: ep.secret,
      PORT: String(port),
      NODE_PATH: path.join(projectRoot(), 'node_modules'),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  try {
    await eventually(
      async () =>
        (await fetch(`http://127.0.0.1:${port}/`, { method: 'POST', body: '{}' }).catch(() => null))?.status === 400,
    );
    const jobId = randomUUID();
    await emit({
      accountId: acc.accountId,
      type: 'video.completed',
      data: { id: jobId },
      key: `video:${jobId}:completed`,
    });
    await eventually(async () => out.includes(`video ready: ${jobId}`));
    const [d] = await eventually(async () =>
      (await delivery(ep.id))[0]?.status === 'succeeded' ? delivery(ep.id) : null,
    );
    expect(d).toMatchObject({ attempts: 1, last_status_code: 200 });
    const forged = await fetch(`http://127.0.0.1:${port}/`, {
      method: 'POST',
      body: JSON.stringify({ id: 'evt_x', object: 'event', type: 'video.completed', created_at: 1, data: { id: 'x' } }),
      headers: {
        'webhook-id': 'evt_x',
        'webhook-timestamp': String(Math.floor(Date.now() / 1000)),
        'webhook-signature': 'v1,AAAA',
      },
    });
    expect(forged.status).toBe(400);
  } finally {
    child.kill();
    fs.rmSync(file, { force: true });
  }
}, 60_000);

test('a delivery whose workflow never started (a lost start) is sent by the reconciler, once', async () => {
  const e = await endpoint('/reconciled');
  // Recorded with its delivery, as a job's final commit records it, but never started.
  const { eventId, deliveries } = await recordEvent(h.deps.db, {
    accountId: e.accountId,
    type: 'video.completed',
    data: { id: 'video_lost_start' },
    key: `test:${randomUUID()}`,
  });
  expect(deliveries).toHaveLength(1);
  const reconcile = () =>
    reconcileDeliveries(
      { db: h.deps.db, temporal: h.deps.temporal!, taskQueue: h.config.temporalTaskQueue, settings: h.config.webhooks },
      { graceMs: 0 },
    );
  expect((await reconcile()).started).toBeGreaterThanOrEqual(1);
  await eventually(async () => (await delivery(e.endpointId))[0]?.status === 'succeeded');
  expect(at('/reconciled').map((r) => r.headers['webhook-id'])).toEqual([eventId]);
  expect((await reconcile()).started).toBe(0);
});

test(
  'a backlog of deliveries waiting their turn does not hide lost ones: each run goes on where the last stopped',
  async () => {
    const e = await endpoint('/behind-backlog');
    // Three lost starts; the runs below check one delivery each, so they are found only by runs that go on.
    const lost: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await recordEvent(h.deps.db, {
        accountId: e.accountId,
        type: 'video.completed',
        data: { id: `video_behind_${i}` },
        key: `test:${randomUUID()}`,
      });
      lost.push(r.eventId);
    }
    const cursor: DeliveryReconcileCursor = {};
    const deps = {
      db: h.deps.db,
      temporal: h.deps.temporal!,
      taskQueue: h.config.temporalTaskQueue,
      settings: h.config.webhooks,
    };
    let started = 0;
    // One full pass over every quiet pending delivery of the shared database, a delivery a run.
    for (let run = 0; run < 10_000; run++) {
      started += (await reconcileDeliveries(deps, { graceMs: 0, limit: 1, maxChecks: 1, cursor })).started;
      if (run > 0 && cursor.after === undefined) break;
    }
    expect(started).toBeGreaterThanOrEqual(3);
    await eventually(async () => at('/behind-backlog').length === 3);
    expect(
      at('/behind-backlog')
        .map((r) => r.headers['webhook-id'])
        .sort(),
    ).toEqual([...lost].sort());
  },
  WORKFLOW_TEST_MS,
);
