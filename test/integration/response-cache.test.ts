import OpenAI from 'openai';
import { randomUUID } from 'node:crypto';
import Anthropic from '@anthropic-ai/sdk';
import { startGateway, type TestGateway } from '../support/gateway';
import { post } from '../support/http';
import { verifyUsage } from '../../src/billing/usageVerify';
import { PgCacheStore } from '../../src/cache';
import { ConsoleClient, jsonOf, makeLogin } from '../e2e/consoleClient';
import { createApiKey } from '../../src/auth/apiKeys';
import { createProject } from '../../src/organizations/projects';
import { createAdminKey } from '../../src/organizations';

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
  await stored(first.response.headers.get('x-gateway-cache-key'));
  const hit = await post(`${gw.url}/v1/chat/completions`, raw, { key: a.key });
  expect(hit.headers.get('x-gateway-cache')).toBe('hit');
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
  await stored(live.response.headers.get('x-gateway-cache-key'));
  const replayed = await rawStream(a.key, body, { 'x-gateway-cache': 'ttl=600' });
  expect(replayed.res.headers.get('x-gateway-cache')).toBe('hit');
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
  await stored(first.headers.get('x-gateway-cache-key'));
  const again = await post(`${gw.url}/v1/chat/completions`, whole, { key: a.key });
  expect(again.headers.get('x-gateway-cache')).toBe('hit');
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

test('refresh skips the lookup, calls the upstream and stores its fresh answer, which later hits replay', async () => {
  const a = await gw.account();
  await enable(a.key);
  const body = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: fresh('Refresh me') }] };
  const first = await post(`${gw.url}/v1/chat/completions`, body, { key: a.key });
  const key = first.headers.get('x-gateway-cache-key');
  await stored(key);
  const firstId = first.body.id;
  const before = upstreamCalls();
  const refreshed = await post(`${gw.url}/v1/chat/completions`, body, {
    key: a.key,
    headers: { 'x-gateway-cache': 'refresh' },
  });
  expect([refreshed.status, refreshed.headers.get('x-gateway-cache')]).toEqual([200, 'miss']);
  expect(refreshed.headers.get('x-gateway-cache-key')).toBe(key);
  expect(upstreamCalls()).toBe(before + 1);
  const freshId = refreshed.body.id;
  expect(freshId).not.toBe(firstId);
  // Once the fresh answer is stored, a plain request replays it, not the first.
  while (!(await gw.deps.cache!.store.get(key!))?.toString().includes(freshId))
    await new Promise((res) => setTimeout(res, 10));
  const hit = await post(`${gw.url}/v1/chat/completions`, body, { key: a.key });
  expect(hit.headers.get('x-gateway-cache')).toBe('hit');
  expect(hit.body.id).toBe(freshId);
  expect(upstreamCalls()).toBe(before + 1);
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

/** Resolves once the entry of a miss (its x-gateway-cache-key) is stored: it is written just after the answer. */
async function stored(key: string | null): Promise<void> {
  // (the key of the miss, from its x-gateway-cache-key header)
  expect(key).toMatch(/^[0-9a-f]{64}$/);
  while (!(await gw.deps.cache!.store.get(key!))) await new Promise((res) => setTimeout(res, 10));
}

/** Once the miss `first` has its entry stored, sends `send`, which must be a hit. */
async function untilHit<T extends { response: Response }>(first: { response: Response }, send: () => Promise<T>) {
  await stored(first.response.headers.get('x-gateway-cache-key'));
  const r = await send();
  expect(r.response.headers.get('x-gateway-cache')).toBe('hit');
  return r;
}

describe('every cached interface: a miss then a hit of the same shape, with no upstream call', () => {
  let key: string;
  const anyCalls = () => gw.emulator.control.requests.length;
  beforeAll(async () => {
    const a = await gw.account();
    key = a.key;
    await enable(key);
  });

  test('embeddings and legacy completions (openai SDK)', async () => {
    const c = client(key);
    const e = { model: 'text-embedding-3-small', input: [fresh('embed me'), 'and me'] };
    const first = await c.embeddings.create(e).withResponse();
    expect(first.response.headers.get('x-gateway-cache')).toBe('miss');
    const calls = anyCalls();
    const hit = await untilHit(first, () => c.embeddings.create(e).withResponse());
    expect(hit.data).toEqual(first.data);

    const p = { model: 'gpt-3.5-turbo-instruct', prompt: fresh('Once upon a time'), max_tokens: 16 };
    const live = await c.completions.create(p).withResponse();
    expect(live.response.headers.get('x-gateway-cache')).toBe('miss');
    const again = await untilHit(live, () => c.completions.create(p).withResponse());
    expect(again.data).toEqual(live.data);
    const s = { ...p, stream: true as const };
    const streamed = await c.completions.create(s).withResponse();
    const liveChunks: unknown[] = [];
    for await (const ch of streamed.data) liveChunks.push(ch);
    const replay = await untilHit(streamed, () => c.completions.create(s).withResponse());
    const replayed: unknown[] = [];
    for await (const ch of replay.data) replayed.push(ch);
    expect(replayed).toEqual(liveChunks);
    expect(anyCalls()).toBe(calls + 2); // the completion's and the stream's misses only
  });

  test.each([
    ['native (Anthropic upstream)', 'claude-haiku-4-5'],
    ['translated (OpenAI upstream)', 'gpt-4o-mini'],
  ])('messages, %s (@anthropic-ai/sdk): whole and streamed', async (_, model) => {
    const c = new Anthropic({ apiKey: key, baseURL: gw.url, maxRetries: 0 });
    const req = { model, max_tokens: 40, messages: [{ role: 'user' as const, content: fresh('Hello Claude') }] };
    const first = await c.messages.create(req).withResponse();
    expect(first.response.headers.get('x-gateway-cache')).toBe('miss');
    const calls = anyCalls();
    const hit = await untilHit(first, () => c.messages.create(req).withResponse());
    expect(hit.data).toEqual(first.data);
    // A beta header changes what the upstream does: another entry.
    const beta = await c.messages.create(req, { headers: { 'anthropic-beta': 'some-beta-2025' } }).withResponse();
    expect(beta.response.headers.get('x-gateway-cache')).toBe('miss');

    const live = await c.messages.create({ ...req, stream: true }).withResponse();
    const liveEvents: unknown[] = [];
    for await (const ev of live.data) liveEvents.push(ev);
    const replay = await untilHit(live, () => c.messages.create({ ...req, stream: true }).withResponse());
    const events: { type: string }[] = [];
    for await (const ev of replay.data) events.push(ev);
    expect(events).toEqual(liveEvents);
    expect(events[0].type).toBe('message_start');
    expect(events.at(-1)!.type).toBe('message_stop');
    expect(anyCalls()).toBe(calls + 2); // the beta request's and the stream's misses only
  });

  test.each([
    ['native (Responses upstream)', 'gpt-5-codex'],
    ['translated (chat upstream)', 'gpt-4o-mini'],
  ])('responses, %s (openai SDK): whole and streamed', async (_, model) => {
    const c = client(key);
    const req = { model, input: fresh('Write a haiku'), max_output_tokens: 40 };
    const first = await c.responses.create(req).withResponse();
    expect(first.response.headers.get('x-gateway-cache')).toBe('miss');
    const calls = anyCalls();
    const hit = await untilHit(first, () => c.responses.create(req).withResponse());
    expect(hit.data).toEqual(first.data);
    const live = await c.responses.create({ ...req, stream: true }).withResponse();
    const liveEvents: { type: string }[] = [];
    for await (const ev of live.data) liveEvents.push(ev);
    const replay = await untilHit(live, () => c.responses.create({ ...req, stream: true }).withResponse());
    const events: { type: string }[] = [];
    for await (const ev of replay.data) events.push(ev);
    expect(events).toEqual(liveEvents);
    expect(events.at(-1)!.type).toBe('response.completed');
    expect(anyCalls()).toBe(calls + 1); // the stream's miss only
  });
});

test('purge on Postgres: one entry and all of a model, the account own only', async () => {
  const a = await gw.account();
  const b = await gw.account();
  const ask = (content: string) =>
    post(
      `${gw.url}/v1/chat/completions`,
      { model: 'gpt-4o-mini', messages: [{ role: 'user', content }] },
      {
        key: a.key,
        headers: { 'x-gateway-cache': 'ttl=60' },
      },
    );
  const first = await ask(fresh('purge pg'));
  const second = await ask(fresh('purge pg too'));
  const one = first.headers.get('x-gateway-cache-key')!;
  await stored(one);
  await stored(second.headers.get('x-gateway-cache-key'));
  const del = (key: string, path: string) =>
    fetch(`${gw.url}${path}`, { method: 'DELETE', headers: { authorization: `Bearer ${key}` } });
  // Purges take the organization's admin key: a project key is a 403 in OpenAI's error shape, and deletes nothing.
  const [aa, ba] = await Promise.all([a, b].map(async (x) => (await createAdminKey(gw.deps.db, x.accountId)).value));
  for (const path of [`/v1/cache/entries/${one}`, '/v1/cache/entries?model=gpt-4o-mini']) {
    const refused = await del(a.key, path);
    expect(refused.status).toBe(403);
    expect(await refused.json()).toEqual({
      error: expect.objectContaining({ type: 'invalid_request_error', code: 'admin_key_required', param: null }),
    });
  }
  expect((await del('sk-gw-made-up', `/v1/cache/entries/${one}`)).status).toBe(401);
  expect(await gw.deps.cache!.store.get(one)).not.toBeNull();
  // Reading stats stays open to project keys (docs/cache.md).
  expect((await fetch(`${gw.url}/v1/cache/stats`, { headers: { authorization: `Bearer ${a.key}` } })).status).toBe(200);
  expect((await del(ba, `/v1/cache/entries/${one}`)).status).toBe(404);
  expect((await del(aa, `/v1/cache/entries/${one}`)).status).toBe(200);
  expect(await gw.deps.cache!.store.get(one)).toBeNull();
  expect(await (await del(aa, '/v1/cache/entries?model=gpt-4o-mini')).json()).toMatchObject({ deleted: 1 });
});

test("purge a project's entries with the admin key: the other project's stay; another's project is 404", async () => {
  const a = await gw.account();
  const [p, q] = await Promise.all(['one', 'two'].map((name) => createProject(gw.deps.db, a.accountId, { name })));
  const keyIn = async (projectId: string) => (await createApiKey(gw.deps.db, a.accountId, 'k', { projectId })).key;
  const [pk, qk] = [await keyIn(p.id), await keyIn(q.id)];
  const ask = (key: string) =>
    post(
      `${gw.url}/v1/chat/completions`,
      { model: 'gpt-4o-mini', messages: [{ role: 'user', content: fresh('purge project') }] },
      { key, headers: { 'x-gateway-cache': 'ttl=60' } },
    ).then((r) => r.headers.get('x-gateway-cache-key')!);
  const [p1, p2, q1] = [await ask(pk), await ask(pk), await ask(qk)];
  for (const k of [p1, p2, q1]) await stored(k);
  const admin = (await createAdminKey(gw.deps.db, a.accountId)).value;
  const del = (key: string, path: string) =>
    fetch(`${gw.url}${path}`, { method: 'DELETE', headers: { authorization: `Bearer ${key}` } });
  expect((await del(pk, `/v1/cache/entries?project_id=${p.id}`)).status).toBe(403);
  const purged = await del(admin, `/v1/cache/entries?project_id=${p.id}`);
  expect(await purged.json()).toEqual({ object: 'cache.purge', project_id: p.id, deleted: 2 });
  expect(await gw.deps.cache!.store.get(p1)).toBeNull();
  expect(await gw.deps.cache!.store.get(p2)).toBeNull();
  expect(await gw.deps.cache!.store.get(q1)).not.toBeNull();
  const stranger = await gw.account();
  const theirs = await createProject(gw.deps.db, stranger.accountId, { name: 'theirs' });
  expect((await del(admin, `/v1/cache/entries?project_id=${theirs.id}`)).status).toBe(404);
  const bad = await del(admin, '/v1/cache/entries?project_id=x%27');
  expect([bad.status, ((await bad.json()) as any).error.param]).toEqual([400, 'project_id']);
});

test('an answer over the entry size limit is not stored', async () => {
  const a = await gw.account();
  const config = gw.deps.cache!.config as { maxEntryBytes: number };
  const before = config.maxEntryBytes;
  config.maxEntryBytes = 200;
  try {
    const body = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: fresh('a long answer please') }] };
    const opts = { key: a.key, headers: { 'x-gateway-cache': 'ttl=60' } };
    const tooLarge = () =>
      gw.deps.metrics.cache.stores.counter
        .get()
        .then((m) => m.values.find((v) => v.labels.outcome === 'too_large')?.value ?? 0);
    const counted = await tooLarge();
    const miss = await post(`${gw.url}/v1/chat/completions`, body, opts);
    expect(miss.headers.get('x-gateway-cache')).toBe('miss');
    // Decided before the answer was sent (its size is known then): nothing was written.
    expect(await tooLarge()).toBe(counted + 1);
    expect(await gw.deps.cache!.store.get(miss.headers.get('x-gateway-cache-key')!)).toBeNull();
  } finally {
    config.maxEntryBytes = before;
  }
});

test('Postgres storage: expired entries are deleted and the total kept under the cap, the newest kept', async () => {
  const db = gw.deps.db;
  const store = new PgCacheStore(db, 3000, 0);
  const owner = { accountId: randomUUID(), model: 'm', projectId: null };
  await db.query(
    `INSERT INTO response_cache (key, account_id, model, body, size, expires_at)
     VALUES ('expired-one', $1, 'm', '\\x00', 1, now() - interval '1 second')`,
    [owner.accountId],
  );
  const keys: string[] = [];
  for (let i = 0; i < 5; i++) {
    keys.push(`cap-${i}-${randomUUID()}`);
    await store.put(keys[i], owner, Buffer.alloc(1000, i), 60);
  }
  await store.close(); // written in one batch, then swept
  const left = await db.query('SELECT key, size FROM response_cache');
  expect(left.rows.reduce((s, r) => s + r.size, 0)).toBeLessThanOrEqual(3000);
  expect(left.rows.map((r) => r.key).sort()).toEqual(keys.slice(2).sort());
});

test('the console: settings, a key switched off, stats with the chart data, purge; metrics count hits', async () => {
  const a = await gw.account();
  const login = await makeLogin(gw, a.accountId, 'customer');
  const con = new ConsoleClient(gw.url);
  expect((await con.signIn(login.email, login.password)).status).toBe(200);
  const view = await con.json('GET', '/console/api/cache');
  expect(view.settings).toMatchObject({ enabled: false, scope: 'account', hit_price_vnd: 0, storage: 'postgres' });
  expect(view.settings.keys).toEqual([
    { id: a.keyId, name: 'test', project_id: expect.stringMatching(/^proj_/), enabled: null, effective: false },
  ]);
  const bad = await con.request('PATCH', '/console/api/cache/settings', { default_ttl_seconds: 0 });
  expect(bad.status).toBe(400);
  expect((await jsonOf(bad)).error.param).toBe('default_ttl_seconds');
  const set = await con.json('PATCH', '/console/api/cache/settings', { enabled: true, default_ttl_seconds: 90 });
  expect(set).toMatchObject({ enabled: true, default_ttl_seconds: 90 });

  const body = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: fresh('console question') }] };
  const miss = await post(`${gw.url}/v1/chat/completions`, body, { key: a.key });
  expect(miss.headers.get('x-gateway-cache')).toBe('miss');
  await stored(miss.headers.get('x-gateway-cache-key'));
  const hit = await post(`${gw.url}/v1/chat/completions`, body, { key: a.key });
  expect(hit.headers.get('x-gateway-cache')).toBe('hit');
  const metrics = await gw.deps.metrics.registry.metrics();
  expect(metrics).toMatch(/gateway_cache_lookups_total\{operation="chat.completions",result="hit"\} [1-9]/);
  expect(metrics).toMatch(/gateway_cache_saved_vnd_total\{operation="chat.completions"\} [1-9]/);

  // The key switched off: not cached, whatever the account says (and even when the request asks).
  const off = await con.json('PUT', `/console/api/cache/keys/${a.keyId}`, { enabled: false });
  expect(off.keys[0]).toMatchObject({ enabled: false, effective: false });
  const asked = await post(`${gw.url}/v1/chat/completions`, body, {
    key: a.key,
    headers: { 'x-gateway-cache': 'ttl=60' },
  });
  expect(asked.headers.get('x-gateway-cache')).toBeNull();
  const other = await gw.account();
  expect((await con.request('PUT', `/console/api/cache/keys/${other.keyId}`, { enabled: true })).status).toBe(404);

  const { stats } = await con.json('GET', '/console/api/cache');
  expect(stats).toMatchObject({ hits: 1, misses: 1, saved_vnd: Number(miss.headers.get('x-gateway-cost-vnd')) });
  expect(stats.days).toHaveLength(1);
  const purged = await con.json('DELETE', '/console/api/cache/entries?model=gpt-4o-mini');
  expect(purged).toEqual({ object: 'cache.purge', model: 'gpt-4o-mini', deleted: 1 });
  expect((await fetch(`${gw.url}/console/static/page-cache.js`)).status).toBe(200);
});

test("scope 'project': a project's keys share entries, two projects' keys do not; a project's own switch", async () => {
  const a = await gw.account();
  const [p, q] = await Promise.all(['one', 'two'].map((name) => createProject(gw.deps.db, a.accountId, { name })));
  const key = async (projectId: string) => (await createApiKey(gw.deps.db, a.accountId, 'k', { projectId })).key;
  const [p1, p2, q1] = [await key(p.id), await key(p.id), await key(q.id)];
  const login = await makeLogin(gw, a.accountId, 'customer');
  const con = new ConsoleClient(gw.url);
  expect((await con.signIn(login.email, login.password)).status).toBe(200);
  // The account's cache stays off; each project is switched on in the console, by the settings route's scope.
  expect(await enable(a.key, { scope: 'project' })).toMatchObject({ enabled: false, scope: 'project' });
  for (const id of [p.id, q.id]) await con.json('PUT', `/console/api/cache/projects/${id}`, { enabled: true });
  const view = await con.json('GET', '/console/api/cache');
  expect(view.settings.projects).toEqual(
    expect.arrayContaining([{ id: p.id, name: 'one', enabled: true, effective: true }]),
  );
  expect(view.settings.keys.find((k: any) => k.id === a.keyId)).toMatchObject({ effective: false });

  const body = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: fresh('project scope') }] };
  const ask = (k: string) =>
    post(`${gw.url}/v1/chat/completions`, body, { key: k }).then((r) => {
      expect(r.status).toBe(200);
      return r;
    });
  const first = await ask(p1);
  expect(first.headers.get('x-gateway-cache')).toBe('miss');
  await stored(first.headers.get('x-gateway-cache-key'));
  expect((await ask(p2)).headers.get('x-gateway-cache')).toBe('hit');
  const other = await ask(q1);
  expect(other.headers.get('x-gateway-cache')).toBe('miss');
  expect(other.headers.get('x-gateway-cache-key')).not.toBe(first.headers.get('x-gateway-cache-key'));
  expect(upstreamCalls()).toBe(2);

  // Project two switched off through the API: its keys are not cached; bad values and others' projects refused.
  const put = (path: string, b: unknown) =>
    fetch(`${gw.url}${path}`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${a.key}`, 'content-type': 'application/json' },
      body: JSON.stringify(b),
    });
  expect((await put(`/v1/cache/projects/${q.id}`, { enabled: false })).status).toBe(200);
  expect((await ask(q1)).headers.get('x-gateway-cache')).toBeNull();
  const bad = await put(`/v1/cache/projects/${q.id}`, { enabled: 'yes' });
  expect([bad.status, ((await bad.json()) as any).error.param]).toEqual([400, 'enabled']);
  const stranger = await gw.account();
  const theirs = await createProject(gw.deps.db, stranger.accountId, { name: 'theirs' });
  expect((await put(`/v1/cache/projects/${theirs.id}`, { enabled: true })).status).toBe(404);
});

test('stats per project: hits, misses, VND saved of two projects, in the API, the console and metrics', async () => {
  const a = await gw.account();
  const [p, q] = await Promise.all(['alpha', 'beta'].map((name) => createProject(gw.deps.db, a.accountId, { name })));
  const key = async (projectId: string) => (await createApiKey(gw.deps.db, a.accountId, 'k', { projectId })).key;
  const [p1, p2, q1] = [await key(p.id), await key(p.id), await key(q.id)];
  expect(await enable(a.key, { enabled: true, scope: 'project' })).toMatchObject({ scope: 'project' });

  // Project alpha: one miss, then two hits (one per key); project beta: two misses (two questions), one hit.
  const ask = async (k: string, what: string) => {
    const body = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: what }] };
    const r = await post(`${gw.url}/v1/chat/completions`, body, { key: k });
    expect(r.status).toBe(200);
    return r;
  };
  const [qa, qb, qc] = [fresh('alpha asks'), fresh('beta asks'), fresh('beta asks again')];
  const pMiss = await ask(p1, qa);
  await stored(pMiss.headers.get('x-gateway-cache-key'));
  for (const k of [p1, p2]) expect((await ask(k, qa)).headers.get('x-gateway-cache')).toBe('hit');
  const qMiss = await ask(q1, qb);
  expect((await ask(q1, qc)).headers.get('x-gateway-cache')).toBe('miss');
  await stored(qMiss.headers.get('x-gateway-cache-key'));
  expect((await ask(q1, qb)).headers.get('x-gateway-cache')).toBe('hit');
  const pCost = Number(pMiss.headers.get('x-gateway-cost-vnd'));
  const qCost = Number(qMiss.headers.get('x-gateway-cost-vnd'));
  expect(pCost).toBeGreaterThan(0);

  const today = new Date().toISOString().slice(0, 10);
  const stats: any = await (
    await fetch(`${gw.url}/v1/cache/stats?days=7`, { headers: { authorization: `Bearer ${a.key}` } })
  ).json();
  expect(stats).toMatchObject({ object: 'cache.stats', hits: 3, misses: 3, saved_vnd: 2 * pCost + qCost });
  // (both have three lookups: the busiest-first order does not tell them apart, so by name here)
  const byName = (xs: any[]) => [...xs].sort((x, y) => x.name.localeCompare(y.name));
  expect(byName(stats.projects)).toEqual([
    {
      project_id: p.id,
      name: 'alpha',
      hits: 2,
      misses: 1,
      saved_vnd: 2 * pCost,
      days: [{ day: today, hits: 2, misses: 1, saved_vnd: 2 * pCost }],
    },
    {
      project_id: q.id,
      name: 'beta',
      hits: 1,
      misses: 2,
      saved_vnd: qCost,
      days: [{ day: today, hits: 1, misses: 2, saved_vnd: qCost }],
    },
  ]);

  // The console's cache page reads the same figures (its per-project table and chart).
  const login = await makeLogin(gw, a.accountId, 'customer');
  const con = new ConsoleClient(gw.url);
  expect((await con.signIn(login.email, login.password)).status).toBe(200);
  const view = await con.json('GET', '/console/api/cache?days=7');
  expect(view.stats.projects).toEqual(stats.projects);

  // Prometheus: per project (label values bounded by CACHE_METRICS_MAX_PROJECTS).
  const metrics = await gw.deps.metrics.registry.metrics();
  expect(metrics).toContain(`gateway_cache_project_lookups_total{project="${p.id}",result="hit"} 2`);
  expect(metrics).toContain(`gateway_cache_project_lookups_total{project="${q.id}",result="miss"} 2`);
  expect(metrics).toContain(`gateway_cache_project_saved_vnd_total{project="${p.id}"} ${2 * pCost}`);
});
