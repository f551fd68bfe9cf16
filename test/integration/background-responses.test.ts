import OpenAI from 'openai';
import { randomUUID } from 'node:crypto';
import { getBalance, verifyProjections } from '../../src/billing/ledger';
import { setKeyLimits } from '../../src/limits/keyLimits';
import { reconcileBackgroundResponses } from '../../src/backgroundResponses/reconciler';
import { verifyBackgroundResponses } from '../../src/backgroundResponses/verify';
import { eventually, fastBackgroundSettings, startVideoHarness, type VideoHarness } from '../support/video';
import { fastWebhookSettings, startReceiver, type Receiver } from '../support/webhookReceiver';

/**
 * Background responses (POST /v1/responses with background: true) with the official openai SDK as the client,
 * through the real gateway, worker, Temporal dev server and Postgres, on a native Responses upstream
 * (gpt-5-codex) and a translated chat upstream (gpt-4o-mini): queued at once, run by a workflow, read and resumed
 * from the store byte for byte, cancelled, deleted, announced by signed webhooks; the money exact.
 */

const NATIVE = 'gpt-5-codex';
const TRANSLATED = 'gpt-4o-mini';
const IN_FLIGHT = 3;

let h: VideoHarness;
let rx: Receiver;
beforeAll(async () => {
  h = await startVideoHarness(
    {},
    {
      webhooks: fastWebhookSettings(),
      backgroundResponses: fastBackgroundSettings({ maxInFlightPerKey: IN_FLIGHT, cancelWaitMs: 10_000 }),
    },
  );
  rx = await startReceiver();
}, 120_000);
afterAll(async () => {
  await h?.close();
  await rx?.close();
});
afterEach(() => h.emulator.control.reset());

const client = (key: string) => new OpenAI({ apiKey: key, baseURL: `${h.url}/v1`, maxRetries: 0 });
const row = async (id: string) =>
  (await h.deps.db.query('SELECT * FROM background_responses WHERE id = $1', [id])).rows[0];

/** The money of a finished response: charged its usage record's cost, nothing held, projections true. */
async function expectSettled(accountId: string, start: number, id: string): Promise<number> {
  const r = await row(id);
  const usage = await h.deps.db.query('SELECT cost_vnd, shortfall_vnd FROM usage_records WHERE id = $1', [r.usage_id]);
  const cost = usage.rows[0]?.cost_vnd ?? 0;
  expect(r.cost_vnd).toBe(cost);
  const b = await getBalance(h.deps.db, accountId);
  expect(b).toMatchObject({ balance: start - cost, held: 0 });
  const hold = await h.deps.db.query('SELECT status FROM holds WHERE id = $1', [r.hold_id]);
  expect(hold.rows[0].status).toBe('closed');
  expect(await verifyProjections(h.deps.db)).toEqual([]);
  return cost;
}

/** Raw SSE text of a request. */
async function sseText(key: string, path: string, init: RequestInit = {}): Promise<string> {
  const res = await fetch(`${h.url}${path}`, {
    ...init,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
  });
  expect(res.status).toBe(200);
  return res.text();
}

describe.each([
  ['native', NATIVE],
  ['translated', TRANSLATED],
])('%s upstream', (_name, model) => {
  test('queued at once, completed by the workflow, charged once from its usage', async () => {
    const BAL = 2_000_000;
    const acc = await h.account(BAL);
    const c = client(acc.key);
    const r = await c.responses.create({ model, input: 'Say hello in background', background: true });
    expect(r).toMatchObject({ object: 'response', status: 'queued', background: true, model });
    const done = await eventually(async () => {
      const x = await c.responses.retrieve(r.id);
      return x.status === 'completed' ? x : null;
    });
    expect(done.id).toBe(r.id);
    expect(done.output_text.length).toBeGreaterThan(0);
    expect(done.usage?.output_tokens).toBeGreaterThan(0);
    const cost = await expectSettled(acc.accountId, BAL, r.id);
    expect(cost).toBeGreaterThan(0);
    // The stored turn continues under the id the client was given.
    const next = await c.responses.create({ model, input: 'and again', previous_response_id: r.id });
    expect(next.status).toBe('completed');
  });

  test('stream: true follows the stored events live; a resumed stream is byte-identical after N', async () => {
    const acc = await h.account(2_000_000);
    const c = client(acc.key);
    h.emulator.control.settings.chunkDelayMs = 5;
    const stream = await c.responses.create({ model, input: 'Stream me a story', background: true, stream: true });
    const live: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const e of stream) live.push(e);
    const id = (live[0] as { response: { id: string } }).response.id;
    expect(live.map((e) => e.sequence_number)).toEqual(live.map((_, i) => i));
    expect(live.at(-1)!.type).toBe('response.completed');
    const resumed: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const e of await c.responses.retrieve(id, { stream: true, starting_after: 2 })) resumed.push(e);
    expect(resumed).toEqual(live.slice(3));
    // Byte for byte: the whole stream, POSTed live and read again.
    const posted = await sseText(acc.key, '/v1/responses', {
      method: 'POST',
      body: JSON.stringify({ model, input: 'Bytes', background: true, stream: true }),
    });
    const pid = /"id":"(resp_[0-9a-f]+)"/.exec(posted)![1];
    expect(await sseText(acc.key, `/v1/responses/${pid}?stream=true`)).toBe(posted);
    expect(await sseText(acc.key, `/v1/responses/${pid}?stream=true&starting_after=-1`)).toBe(posted);
  });

  test('cancel stops the upstream call: cancelled, what it delivered billed, the rest released', async () => {
    const BAL = 2_000_000;
    const acc = await h.account(BAL);
    const c = client(acc.key);
    h.emulator.control.settings.chunkDelayMs = 400; // slow enough to be cancelled mid-answer
    const r = await c.responses.create({ model, input: 'A long answer please', background: true });
    await eventually(async () => (await row(r.id)).status === 'in_progress');
    const cancelled = await c.responses.cancel(r.id);
    expect(cancelled.status).toBe('cancelled');
    expect((await c.responses.retrieve(r.id)).status).toBe('cancelled');
    await expectSettled(acc.accountId, BAL, r.id);
  });
});

test('the POST only prepares: no upstream call, no reservation from the credit lease; the hold is placed', async () => {
  // The run goes to a task queue no worker polls: whatever reaches the upstream could only be the POST's own.
  const settings = h.deps.config.backgroundResponses;
  const taskQueue = settings.taskQueue;
  settings.taskQueue = `unpolled-${randomUUID()}`;
  const BAL = 2_000_000;
  const acc = await h.account(BAL);
  const c = client(acc.key);
  const marker = `prepared only ${randomUUID()}`;
  try {
    for (const model of [NATIVE, TRANSLATED])
      expect((await c.responses.create({ model, input: marker, background: true })).status).toBe('queued');
  } finally {
    settings.taskQueue = taskQueue;
  }
  const sent = h.emulator.control.requests.filter((q) => JSON.stringify(q.body ?? '').includes(marker));
  expect(sent).toEqual([]);
  expect(h.deps.credit.leaseOf(acc.accountId)).toBeNull();
  // Both holds were placed at POST, at the estimates the rows keep.
  const rows = await h.deps.db.query('SELECT id, max_cost_vnd FROM background_responses WHERE account_id = $1', [
    acc.accountId,
  ]);
  const held = rows.rows.reduce((n: number, x: { max_cost_vnd: number }) => n + Number(x.max_cost_vnd), 0);
  expect(held).toBeGreaterThan(0);
  expect(await getBalance(h.deps.db, acc.accountId)).toMatchObject({ balance: BAL, held });
  // Cancelled before any run: nothing charged, the holds released.
  for (const x of rows.rows) expect((await c.responses.cancel(x.id)).status).toBe('cancelled');
  expect(await getBalance(h.deps.db, acc.accountId)).toMatchObject({ balance: BAL, held: 0 });
});

test('402 before anything starts when the bound is not covered; nothing held, no row', async () => {
  const acc = await h.account(10);
  const c = client(acc.key);
  await expect(c.responses.create({ model: TRANSLATED, input: 'hi', background: true })).rejects.toMatchObject({
    status: 402,
  });
  const n = await h.deps.db.query('SELECT count(*)::int AS n FROM background_responses WHERE account_id = $1', [
    acc.accountId,
  ]);
  expect(n.rows[0].n).toBe(0);
  expect(await getBalance(h.deps.db, acc.accountId)).toMatchObject({ balance: 10, held: 0 });
});

test("another account's id is 404 on GET, stream, cancel and DELETE; DELETE removes it", async () => {
  const a = await h.account(2_000_000);
  const b = await h.account(2_000_000);
  const r = await client(a.key).responses.create({ model: TRANSLATED, input: 'mine', background: true });
  const other = client(b.key);
  await expect(other.responses.retrieve(r.id)).rejects.toMatchObject({ status: 404 });
  await expect(other.responses.retrieve(r.id, { stream: true })).rejects.toMatchObject({ status: 404 });
  await expect(other.responses.cancel(r.id)).rejects.toMatchObject({ status: 404 });
  await expect(other.responses.delete(r.id)).rejects.toMatchObject({ status: 404 });
  await eventually(async () => (await client(a.key).responses.retrieve(r.id)).status === 'completed');
  await client(a.key).responses.delete(r.id);
  await expect(client(a.key).responses.retrieve(r.id)).rejects.toMatchObject({ status: 404 });
});

test('starting_after out of the sequence range, or not written as one, is a 400 naming it', async () => {
  const acc = await h.account(2_000_000);
  const r = await client(acc.key).responses.create({ model: TRANSLATED, input: 'count me', background: true });
  await eventually(async () => (await client(acc.key).responses.retrieve(r.id)).status === 'completed');
  const stream = (after: string) =>
    fetch(`${h.url}/v1/responses/${r.id}?stream=true&starting_after=${encodeURIComponent(after)}`, {
      headers: { authorization: `Bearer ${acc.key}` },
    });
  // 2^31 and beyond were a 200 with an empty stream (and a database error); 1e21 and 0x10 passed Number().
  for (const after of ['2147483648', '9007199254740993', '1e21', '1e3', '0x10', ' 5', '-2', '1.5', '', 'x']) {
    const res = await stream(after);
    const body = (await res.json()) as { error?: { param?: string; type?: string } };
    expect({ after, status: res.status, error: body.error }).toEqual({
      after,
      status: 400,
      error: expect.objectContaining({ type: 'invalid_request_error', param: 'starting_after' }),
    });
  }
  // The largest sequence number: nothing after it, an empty stream that ends.
  const last = await stream('2147483647');
  expect(last.status).toBe(200);
  expect(await last.text()).not.toContain('"sequence_number"');
});

test('a key has at most its limit of background responses in flight: one more is 429', async () => {
  const acc = await h.account(5_000_000);
  const c = client(acc.key);
  h.emulator.control.settings.chunkDelayMs = 300;
  const running = [];
  for (let i = 0; i < IN_FLIGHT; i++)
    running.push(await c.responses.create({ model: TRANSLATED, input: `slow ${i}`, background: true }));
  await expect(
    c.responses.create({ model: TRANSLATED, input: 'one too many', background: true }),
  ).rejects.toMatchObject({ status: 429 });
  for (const r of running) await c.responses.cancel(r.id);
  const BAL = 5_000_000;
  const b = await getBalance(h.deps.db, acc.accountId);
  expect(b!.held).toBe(0);
  expect(b!.balance).toBeLessThanOrEqual(BAL);
  expect(await verifyProjections(h.deps.db)).toEqual([]);
});

test("a background response counts against its key's rate limit like any request", async () => {
  const acc = await h.account(2_000_000);
  await setKeyLimits(h.deps.db, acc.accountId, acc.keyId, { rpm: 1 });
  const c = client(acc.key);
  const r = await c.responses.create({ model: TRANSLATED, input: 'counted', background: true });
  await expect(c.responses.create({ model: TRANSLATED, input: 'over', background: true })).rejects.toMatchObject({
    status: 429,
  });
  await eventually(async () => (await c.responses.retrieve(r.id)).status === 'completed');
});

/** A webhook endpoint of the account at the receiver, on a path of its own: the path and its signing secret. */
async function webhookEndpoint(key: string): Promise<{ path: string; secret: string }> {
  const path = `/hook-${randomUUID()}`;
  const r = await fetch(`${h.url}/v1/webhooks`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ url: `${rx.url}${path}` }),
  });
  return { path, secret: ((await r.json()) as { secret: string }).secret };
}

test('webhooks announce response.completed and response.cancelled, verified by the SDK', async () => {
  const acc = await h.account(2_000_000);
  const { path, secret } = await webhookEndpoint(acc.key);
  const c = client(acc.key);
  const done = await c.responses.create({ model: NATIVE, input: 'announce me', background: true });
  h.emulator.control.settings.chunkDelayMs = 400;
  const stopped = await c.responses.create({ model: TRANSLATED, input: 'stop me please', background: true });
  await eventually(async () => (await row(stopped.id)).status === 'in_progress');
  await c.responses.cancel(stopped.id);
  const openai = new OpenAI({ apiKey: 'unused' });
  const events = await eventually(async () => {
    const got = await Promise.all(
      rx.received.filter((r) => r.path === path).map((r) => openai.webhooks.unwrap(r.body, r.headers, secret)),
    );
    return got.length >= 2 ? got : null;
  });
  const byType = Object.fromEntries(events.map((e) => [e.type, (e.data as { id: string }).id]));
  expect(byType).toEqual({ 'response.completed': done.id, 'response.cancelled': stopped.id });
});

test("the reconciler's end of a response whose workflow was terminated is announced (response.failed)", async () => {
  const acc = await h.account(2_000_000);
  const { path, secret } = await webhookEndpoint(acc.key);
  const c = client(acc.key);
  h.emulator.control.settings.chunkDelayMs = 400;
  const r = await c.responses.create({ model: TRANSLATED, input: 'terminate and tell me', background: true });
  await eventually(async () => (await row(r.id)).status === 'in_progress');
  await h.deps.temporal!.workflow.getHandle(`bgresp-${r.id}`).terminate('by hand');
  await reconcileBackgroundResponses(
    { db: h.deps.db, temporal: h.deps.temporal!, config: h.config, catalog: h.deps.catalog },
    { graceMs: 0 },
  );
  expect((await row(r.id)).status).toBe('failed');
  const openai = new OpenAI({ apiKey: 'unused' });
  const event = await eventually(async () => {
    const got = rx.received.filter((x) => x.path === path);
    return got.length ? openai.webhooks.unwrap(got[0].body, got[0].headers, secret) : null;
  });
  expect([event.type, (event.data as { id: string }).id]).toEqual(['response.failed', r.id]);
});

test('a workflow terminated by hand: the reconciler fails the response, its attempt lost at our cost', async () => {
  const BAL = 5_000_000;
  const acc = await h.account(BAL);
  const since = new Date();
  const c = client(acc.key);
  h.emulator.control.settings.chunkDelayMs = 400;
  const r = await c.responses.create({ model: TRANSLATED, input: 'terminate my workflow please', background: true });
  await eventually(async () => {
    const n = await h.deps.db.query(
      'SELECT count(*)::int AS n FROM background_response_events WHERE response_id = $1',
      [r.id],
    );
    return n.rows[0].n >= 3;
  });
  await h.deps.temporal!.workflow.getHandle(`bgresp-${r.id}`).terminate('by hand');
  await reconcileBackgroundResponses(
    { db: h.deps.db, temporal: h.deps.temporal!, config: h.config, catalog: h.deps.catalog },
    { graceMs: 0 },
  );
  const ended = await row(r.id);
  expect([ended.status, ended.cost_vnd]).toEqual(['failed', 0]);
  const attempts = await h.deps.db.query(
    'SELECT outcome, gateway_cost_vnd FROM background_response_attempts WHERE response_id = $1',
    [r.id],
  );
  expect(attempts.rows).toHaveLength(1);
  expect(attempts.rows[0].outcome).toBe('lost');
  expect(Number(attempts.rows[0].gateway_cost_vnd)).toBeGreaterThan(0);
  expect(await getBalance(h.deps.db, acc.accountId)).toMatchObject({ balance: BAL, held: 0 });
  // The terminated run's activity, told at its next heartbeat, stores and ends nothing more.
  await new Promise((res) => setTimeout(res, 2_500));
  expect((await row(r.id)).status).toBe('failed');
  const v = await verifyBackgroundResponses(h.deps.db, { since });
  expect(v).toMatchObject({ responses: 1, attemptsLost: 1, chargedVnd: 0, mismatches: [] });
});
