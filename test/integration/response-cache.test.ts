import OpenAI from 'openai';
import { startGateway, type TestGateway } from '../support/gateway';
import { post } from '../support/http';
import { verifyUsage } from '../../src/billing/usageVerify';

/**
 * The exact response cache on Postgres storage (src/cache/, docs/cache.md), through the official openai SDK: a
 * repeated request is answered from the cache with no upstream call, as JSON or as a stream of the live stream's
 * shape; key order, whitespace and `user` do not matter; a hit is charged the hit price (0 here) and its usage
 * record says it was a hit and what it saved, which verify-ledger re-prices; a stream cut short is not stored;
 * another account never reads the entry; the header's bad values are 400s naming it.
 */

let gw: TestGateway;
beforeAll(async () => {
  gw = await startGateway({ logLevel: 'warn' }, { temporal: false });
});
afterAll(() => gw.close());
afterEach(() => gw.emulator.control.reset());

const upstreamCalls = () => gw.emulator.control.requests.filter((r) => r.path.includes('/completions')).length;
const client = (key: string, headers: Record<string, string> = {}) =>
  new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0, defaultHeaders: headers });
let n = 0;
/** A prompt no other test sends (entries are per account, but a test's first call must be a miss). */
const fresh = (what: string) => `${what} #${++n} ${Date.now()}`;

async function usageRecords(accountId: string) {
  await gw.deps.credit.flush();
  const r = await gw.deps.db.query(
    'SELECT id, units, cost_vnd, status FROM usage_records WHERE account_id = $1 ORDER BY created_at',
    [accountId],
  );
  return r.rows;
}

async function enable(key: string, patch: object = { enabled: true }) {
  const res = await fetch(`${gw.url}/v1/cache/settings`, {
    method: 'PATCH',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(patch),
  });
  expect(res.status).toBe(200);
  return res.json();
}

test('a repeated chat completion is a hit: no upstream call, same answer, hit and age headers, billed', async () => {
  const a = await gw.account();
  await enable(a.key);
  const c = client(a.key);
  const content = fresh('What is the capital of France?');
  const req = { model: 'gpt-4o-mini', messages: [{ role: 'user' as const, content }], max_tokens: 20 };
  const first = await c.chat.completions.create(req).withResponse();
  expect(first.response.headers.get('x-gateway-cache')).toBe('miss');
  const firstCost = Number(first.response.headers.get('x-gateway-cost-vnd'));
  expect(firstCost).toBeGreaterThan(0);
  const calls = upstreamCalls();
  // The same request with its keys in another order, other whitespace and a `user`: the same entry.
  const raw =
    `{ "max_tokens": 20,\n  "user": "someone", "messages": [{"content": ${JSON.stringify(content)}, ` +
    `"role": "user"}], "model": "gpt-4o-mini" }`;
  let hit: Awaited<ReturnType<typeof post>>;
  for (;;) {
    // The entry is written just after the miss's answer: wait for it (not for a fixed time).
    hit = await post(`${gw.url}/v1/chat/completions`, raw, { key: a.key });
    if (hit.headers.get('x-gateway-cache') === 'hit') break;
    await new Promise((r) => setTimeout(r, 20));
  }
  expect(hit.status).toBe(200);
  expect(hit.body).toEqual(first.data);
  expect(Number(hit.headers.get('age'))).toBeGreaterThanOrEqual(0);
  expect(hit.headers.get('x-gateway-cost-vnd')).toBe('0');
  expect(upstreamCalls()).toBe(calls);
  // Through the SDK too.
  const again = await c.chat.completions.create(req).withResponse();
  expect(again.response.headers.get('x-gateway-cache')).toBe('hit');
  expect(again.data).toEqual(first.data);

  const rows = await usageRecords(a.accountId);
  const hits = rows.filter((r) => r.units.cache_hit === 1);
  expect(hits.length).toBeGreaterThanOrEqual(2);
  for (const h of hits) {
    expect(Number(h.cost_vnd)).toBe(0);
    expect(h.units.saved_vnd).toBe(firstCost);
  }
  const v = await verifyUsage(gw.deps.db);
  expect(v.mismatches.filter((m) => rows.some((r) => r.id === m.id))).toEqual([]);
  // The stats count them.
  const stats: any = await (
    await fetch(`${gw.url}/v1/cache/stats`, { headers: { authorization: `Bearer ${a.key}` } })
  ).json();
  expect(stats.hits).toBeGreaterThanOrEqual(2);
  expect(stats.misses).toBeGreaterThanOrEqual(1);
  expect(stats.saved_vnd).toBe(hits.length * firstCost);
});

async function collect(stream: AsyncIterable<OpenAI.Chat.Completions.ChatCompletionChunk>) {
  const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
  for await (const ch of stream) chunks.push(ch);
  return chunks;
}

async function rawStream(key: string, body: object, headers: Record<string, string> = {}) {
  const res = await fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  return { res, text: await res.text() };
}

test('a streamed hit replays a well-formed stream of the live shape: chunks, usage, cost comment, [DONE]', async () => {
  const a = await gw.account();
  const c = client(a.key, { 'x-gateway-cache': 'ttl=600' }); // asked per request: the account has it off
  const body = {
    model: 'gpt-4o-mini',
    messages: [{ role: 'user' as const, content: fresh('Tell me a story') }],
    max_tokens: 30,
    stream: true as const,
    stream_options: { include_usage: true },
  };
  const live = await c.chat.completions.create(body).withResponse();
  expect(live.response.headers.get('x-gateway-cache')).toBe('miss');
  const liveChunks = await collect(live.data);
  expect(liveChunks.at(-1)!.usage).toBeTruthy();
  const calls = upstreamCalls();
  let replayed: { res: Response; text: string };
  for (;;) {
    replayed = await rawStream(a.key, body, { 'x-gateway-cache': 'ttl=600' });
    if (replayed.res.headers.get('x-gateway-cache') === 'hit') break;
    await new Promise((r) => setTimeout(r, 20));
  }
  expect(replayed.res.headers.get('content-type')).toMatch(/^text\/event-stream/);
  expect(replayed.text).toMatch(/: x-gateway-cost-vnd=0 x-gateway-usage-id=[0-9a-f-]+\n\ndata: \[DONE\]\n\n$/);
  const hit = await c.chat.completions.create(body).withResponse();
  expect(hit.response.headers.get('x-gateway-cache')).toBe('hit');
  expect(await collect(hit.data)).toEqual(liveChunks);
  expect(upstreamCalls()).toBe(calls);
  // Without the usage chunk the stream is another shape: another entry, a miss.
  const noUsage = await c.chat.completions.create({ ...body, stream_options: undefined }).withResponse();
  expect(noUsage.response.headers.get('x-gateway-cache')).toBe('miss');
  expect((await collect(noUsage.data)).some((ch) => ch.usage)).toBe(false);
  // And the whole-answer request is its own entry too.
  const whole = await c.chat.completions.create({ ...body, stream: false, stream_options: undefined }).withResponse();
  expect(whole.response.headers.get('x-gateway-cache')).toBe('miss');
});

test('a stream cut short is not stored; no-store bypasses; another account never reads an entry', async () => {
  const a = await gw.account();
  const b = await gw.account();
  await enable(a.key);
  await enable(b.key);
  const body = {
    model: 'gpt-4o-mini',
    messages: [{ role: 'user', content: fresh('Cut me') }],
    max_tokens: 30,
    stream: true,
  };
  gw.emulator.control.addFault({ match: '/chat/completions', cutAfter: 2, times: 1 });
  const cut = await rawStream(a.key, body);
  expect(cut.res.headers.get('x-gateway-cache')).toBe('miss');
  expect(cut.text).not.toContain('[DONE]');
  const after = await rawStream(a.key, body);
  expect(after.res.headers.get('x-gateway-cache')).toBe('miss'); // the cut one was not kept
  expect(after.text).toContain('[DONE]');

  const whole = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: fresh('Shared question') }] };
  const first = await post(`${gw.url}/v1/chat/completions`, whole, { key: a.key });
  expect(first.headers.get('x-gateway-cache')).toBe('miss');
  for (;;) {
    const r = await post(`${gw.url}/v1/chat/completions`, whole, { key: a.key });
    if (r.headers.get('x-gateway-cache') === 'hit') break;
    await new Promise((res) => setTimeout(res, 20));
  }
  // Account b sends the very same request: its own miss, never a's entry.
  const other = await post(`${gw.url}/v1/chat/completions`, whole, { key: b.key });
  expect(other.headers.get('x-gateway-cache')).toBe('miss');
  const bypass = await post(`${gw.url}/v1/chat/completions`, whole, {
    key: a.key,
    headers: { 'x-gateway-cache': 'no-store' },
  });
  expect(bypass.headers.get('x-gateway-cache')).toBe('bypass');
  expect(Number(bypass.headers.get('x-gateway-cost-vnd'))).toBeGreaterThan(0);
});

test('x-gateway-cache values out of range are 400s naming the header, with nothing called or charged', async () => {
  const a = await gw.account();
  const calls = upstreamCalls();
  for (const v of ['ttl=0', 'ttl=abc', 'ttl=99999999999', 'sometimes', 'no-store, ttl=5']) {
    const r = await post(
      `${gw.url}/v1/chat/completions`,
      { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] },
      { key: a.key, headers: { 'x-gateway-cache': v } },
    );
    expect(r.status).toBe(400);
    expect(r.body.error.param).toBe('x-gateway-cache');
    expect(r.body.error.message).toContain('x-gateway-cache');
  }
  expect(upstreamCalls()).toBe(calls);
  expect(await usageRecords(a.accountId)).toEqual([]);
});
