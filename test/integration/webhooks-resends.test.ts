import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { createWebhookActivities } from '../../src/jobs/webhooks/activities';
import { DAY_MS, webhookTaskQueue, type DeliveryLimits } from '../../src/jobs/webhooks/settings';
import { eventually, startVideoHarness, type VideoHarness } from '../support/video';

/**
 * Resends (issue 35): however many resends of a delivery come at once, its receiver has at most one try of it in
 * flight; resends are limited per account (in any minute) and per delivery (one per interval), past which the
 * API answers 429 with Retry-After and starts nothing. Small limits through the harness's settings.
 */

let h: VideoHarness;
let slow: SlowReceiver;
beforeAll(async () => {
  h = await startVideoHarness(
    {},
    {
      webhooks: {
        allowPrivateUrls: true,
        timeoutMs: 5_000,
        retry: { initialMs: 100, maxMs: 400, windowMs: 60_000 },
        maxEndpoints: 20,
        rotationGraceMs: DAY_MS,
        limits: {},
      },
    },
  );
  slow = await startSlowReceiver(300);
});
afterAll(async () => {
  await h?.close();
  await slow?.close();
});

/** The resend limits for the test at hand (read on each resend and each try). */
const limits = (l: Partial<DeliveryLimits>) => {
  h.config.webhooks.limits = l;
};

interface SlowReceiver {
  url: string;
  /** Requests per webhook-id: how many came, and the most in flight at once. */
  seen(id: string): { count: number; maxInFlight: number };
  close(): Promise<void>;
}

/** Answers every POST 200 after `ms`, counting per webhook-id the requests in flight at once. */
async function startSlowReceiver(ms: number): Promise<SlowReceiver> {
  const stats = new Map<string, { count: number; inFlight: number; maxInFlight: number }>();
  const server = http.createServer((req, res) => {
    const id = String(req.headers['webhook-id']);
    const s = stats.get(id) ?? { count: 0, inFlight: 0, maxInFlight: 0 };
    stats.set(id, s);
    s.count++;
    s.inFlight++;
    s.maxInFlight = Math.max(s.maxInFlight, s.inFlight);
    req.resume();
    setTimeout(() => {
      s.inFlight--;
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
    }, ms);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen: (id) => {
      const s = stats.get(id);
      return { count: s?.count ?? 0, maxInFlight: s?.maxInFlight ?? 0 };
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** An account with an endpoint at the slow receiver and `n` delivered events: their delivery and event ids. */
async function delivered(n: number) {
  const acc = await h.account(0);
  const r = await h.api(acc.key, '/v1/webhooks', { method: 'POST', body: JSON.stringify({ url: `${slow.url}/` }) });
  expect(r.status).toBe(201);
  const endpointId = ((await r.json()) as { id: string }).id;
  const emit = createWebhookActivities({
    db: h.deps.db,
    temporal: h.deps.temporal!,
    taskQueue: webhookTaskQueue(h.config),
    settings: h.config.webhooks,
  }).emitWebhookEvent;
  for (let i = 0; i < n; i++) {
    const jobId = randomUUID();
    await emit({ accountId: acc.accountId, type: 'video.completed', data: { id: jobId }, key: `video:${jobId}:x` });
  }
  const rows = await eventually(async () => {
    const q = await h.deps.db.query(
      "SELECT id, event_id FROM webhook_deliveries WHERE endpoint_id = $1 AND status = 'succeeded'",
      [endpointId],
    );
    return q.rows.length === n ? (q.rows as { id: string; event_id: string }[]) : null;
  });
  const resend = (deliveryId: string) =>
    h.api(acc.key, `/v1/webhooks/${endpointId}/deliveries/${deliveryId}/resend`, { method: 'POST' });
  return { rows, resend };
}

/** A 429 `rate_limit_exceeded` whose Retry-After is whole seconds in [1, max]. */
async function expectTooMany(r: Response, max: number) {
  expect(r.status).toBe(429);
  expect(((await r.json()) as { error: { code: string } }).error.code).toBe('rate_limit_exceeded');
  const after = Number(r.headers.get('retry-after'));
  expect(Number.isInteger(after) && after >= 1 && after <= max).toBe(true);
}

test('30 resends of a delivery at once: its receiver never has more than one try of it in flight', async () => {
  limits({ resendsPerMinute: 1_000, resendIntervalMs: 0 });
  const { rows, resend } = await delivered(1);
  const [d] = rows;
  const before = slow.seen(d.event_id).count;
  const answers = await Promise.all(Array.from({ length: 30 }, () => resend(d.id)));
  expect(answers.map((r) => r.status)).toEqual(Array(30).fill(202));
  // The last resend's try is sent (the earlier generations stand down, or send one after another).
  await eventually(async () => {
    const q = await h.deps.db.query('SELECT status FROM webhook_deliveries WHERE id = $1', [d.id]);
    return q.rows[0].status === 'succeeded' && slow.seen(d.event_id).count > before;
  });
  expect(slow.seen(d.event_id).maxInFlight).toBe(1);
});

test('resends per account: past the limit in a minute, 429 with Retry-After, and nothing is sent', async () => {
  limits({ resendsPerMinute: 2, resendIntervalMs: 0 });
  const { rows, resend } = await delivered(3);
  expect((await resend(rows[0].id)).status).toBe(202);
  expect((await resend(rows[1].id)).status).toBe(202);
  const sent = slow.seen(rows[2].event_id).count;
  await expectTooMany(await resend(rows[2].id), 60);
  const q = await h.deps.db.query('SELECT status FROM webhook_deliveries WHERE id = $1', [rows[2].id]);
  expect(q.rows[0].status).toBe('succeeded');
  expect(slow.seen(rows[2].event_id).count).toBe(sent);
  // Another account has its own allowance.
  const other = await delivered(1);
  expect((await other.resend(other.rows[0].id)).status).toBe(202);
});

test('resends per delivery: a second one within the interval is a 429 with Retry-After; others go on', async () => {
  limits({ resendsPerMinute: 1_000, resendIntervalMs: 60_000 });
  const { rows, resend } = await delivered(2);
  expect((await resend(rows[0].id)).status).toBe(202);
  await expectTooMany(await resend(rows[0].id), 60);
  expect((await resend(rows[1].id)).status).toBe(202);
});
