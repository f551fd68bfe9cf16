import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';
import OpenAI from 'openai';
import { startGateway, type TestGateway } from '../support/gateway';
import { post } from '../support/http';
import { loadConfig } from '../../src/config';
import { verifyUsage } from '../../src/billing/usageVerify';
import { createAdminKey } from '../../src/organizations';
import { createProject } from '../../src/organizations/projects';
import { createApiKey } from '../../src/auth/apiKeys';

/**
 * The response cache on Redis (REDIS_URL, a real redis-server): entries there with their TTL; a hit charged the
 * operator's hit price through the ledger (5 VND here) with its usage record re-priced by verify-ledger; a corrupt or
 * poisoned entry dropped and answered as a miss; purges of one entry and of a model, an account's own only; and
 * Redis down is a miss, never an error.
 */

const REDIS = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const prefix = `gw-test-cache:${randomUUID()}:`;
const HIT_PRICE = 5;
let gw: TestGateway;
let redis: Redis;
beforeAll(async () => {
  const cache = { ...loadConfig().cache, redisPrefix: prefix, hitPriceVnd: HIT_PRICE, timeoutMs: 1000 };
  gw = await startGateway(
    { logLevel: 'silent', redisUrl: REDIS, redisKeyPrefix: `${prefix}rl:`, cache },
    { temporal: false },
  );
  redis = new Redis(REDIS);
});
afterAll(async () => {
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length) await redis.del(...keys);
  redis.disconnect();
  await gw.close();
});

let n = 0;
const fresh = (what: string) => `${what} #${++n} ${Date.now()}`;
const ask = (key: string, content: string, model = 'gpt-4o-mini') =>
  post(
    `${gw.url}/v1/chat/completions`,
    { model, messages: [{ role: 'user', content }] },
    {
      key,
      headers: { 'x-gateway-cache': 'ttl=120' },
    },
  );

/**
 * Resolves once the miss's entry is in Redis (it is written after the answer, in the store's next batch): an entry
 * of its own key, not one planted there (a poisoned entry stays until the answer's own is written over it).
 */
async function stored(res: { headers: Headers }): Promise<string> {
  const key = res.headers.get('x-gateway-cache-key')!;
  expect(key).toMatch(/^[0-9a-f]{64}$/);
  while (!(await redis.get(`${prefix}e:${key}`))?.startsWith(`{"v":1,"key":"${key}"`))
    await new Promise((r) => setTimeout(r, 10));
  return key;
}

test('entries live in Redis with their TTL; a hit is charged the hit price through the ledger', async () => {
  const a = await gw.account();
  const content = fresh('Redis please');
  const miss = await ask(a.key, content);
  expect(miss.headers.get('x-gateway-cache')).toBe('miss');
  const key = await stored(miss);
  const ttl = await redis.ttl(`${prefix}e:${key}`);
  expect(ttl).toBeGreaterThan(100);
  expect(ttl).toBeLessThanOrEqual(120);
  const hit = await ask(a.key, content);
  expect(hit.headers.get('x-gateway-cache')).toBe('hit');
  expect(hit.body).toEqual(miss.body);
  expect(hit.headers.get('x-gateway-cost-vnd')).toBe(String(HIT_PRICE));
  await gw.deps.credit.flush();
  const rows = (
    await gw.deps.db.query('SELECT id, units, cost_vnd FROM usage_records WHERE account_id = $1', [a.accountId])
  ).rows;
  const hitRow = rows.find((r) => r.units.cache_hit === 1)!;
  expect(Number(hitRow.cost_vnd)).toBe(HIT_PRICE);
  expect(hitRow.units.saved_vnd).toBe(Math.max(0, Number(miss.headers.get('x-gateway-cost-vnd')) - HIT_PRICE));
  const v = await verifyUsage(gw.deps.db);
  expect(v.mismatches.filter((m) => rows.some((r) => r.id === m.id))).toEqual([]);
  // The ledger has the hit's charge: balance = top-up - miss - hit.
  const bal: any = await (
    await fetch(`${gw.url}/v1/account`, { headers: { authorization: `Bearer ${a.key}` } })
  ).json();
  expect(bal.balance_vnd).toBe(1_000_000 - Number(miss.headers.get('x-gateway-cost-vnd')) - HIT_PRICE);
});

test('a corrupt or poisoned entry is dropped and answered as a miss', async () => {
  const a = await gw.account();
  const content = fresh('Corrupt me');
  const key = await stored(await ask(a.key, content));
  await redis.set(`${prefix}e:${key}`, '{"v":1,"truncated');
  const afterCorrupt = await ask(a.key, content);
  expect(afterCorrupt.status).toBe(200);
  expect(afterCorrupt.headers.get('x-gateway-cache')).toBe('miss');
  // Another request's valid entry copied under this key (a poisoning): refused, its key does not match.
  const other = await stored(await ask(a.key, fresh('Other question')));
  await stored(afterCorrupt);
  await redis.set(`${prefix}e:${key}`, (await redis.getBuffer(`${prefix}e:${other}`))!);
  const afterPoison = await ask(a.key, content);
  expect(afterPoison.headers.get('x-gateway-cache')).toBe('miss');
  expect(afterPoison.body.choices[0].message.content).toContain('Corrupt me');
  // An entry whose body was altered (its digest no longer matches): refused too.
  await stored(afterPoison);
  // (an entry is a JSON line of its key, digest and the like, then the body as it is: src/cache/entry.ts)
  const entry = (await redis.get(`${prefix}e:${key}`))!;
  expect(entry).toContain('Corrupt me');
  await redis.set(`${prefix}e:${key}`, entry.replace('Corrupt me', 'Trust me'));
  const afterTamper = await ask(a.key, content);
  expect(afterTamper.headers.get('x-gateway-cache')).toBe('miss');
  expect(afterTamper.body.choices[0].message.content).toContain('Corrupt me');
});

test('purge: one entry, all of a model or of a project; another account cannot purge them', async () => {
  const a = await gw.account();
  const b = await gw.account();
  // Purges take the organization's admin key (docs/cache.md).
  const [aa, ba] = await Promise.all([a, b].map(async (x) => (await createAdminKey(gw.deps.db, x.accountId)).value));
  const del = (key: string, path: string) =>
    fetch(`${gw.url}${path}`, { method: 'DELETE', headers: { authorization: `Bearer ${key}` } });
  const one = await stored(await ask(a.key, fresh('purge one')));
  const two = await stored(await ask(a.key, fresh('purge two')));
  const embeds = await post(
    `${gw.url}/v1/embeddings`,
    { model: 'text-embedding-3-small', input: fresh('keep me') },
    { key: a.key, headers: { 'x-gateway-cache': 'ttl=120' } },
  );
  const kept = await stored(embeds);
  expect((await del(ba, `/v1/cache/entries/${one}`)).status).toBe(404);
  expect((await del(ba, '/v1/cache/entries?model=gpt-4o-mini')).status).toBe(200);
  expect(await redis.exists(`${prefix}e:${one}`)).toBe(1);
  const r1 = await del(aa, `/v1/cache/entries/${one}`);
  expect(r1.status).toBe(200);
  expect(await redis.exists(`${prefix}e:${one}`)).toBe(0);
  expect((await del(aa, `/v1/cache/entries/${one}`)).status).toBe(404);
  const r2 = await del(aa, '/v1/cache/entries?model=gpt-4o-mini');
  expect(await r2.json()).toEqual({ object: 'cache.purge', model: 'gpt-4o-mini', deleted: 1 });
  expect(await redis.exists(`${prefix}e:${two}`)).toBe(0);
  expect(await redis.exists(`${prefix}e:${kept}`)).toBe(1);
  expect((await del(aa, '/v1/cache/entries')).status).toBe(400);
  // A project's entries, by its set: the project's own go, the account's other project's stay.
  const p = await createProject(gw.deps.db, a.accountId, { name: 'purged' });
  const pk = (await createApiKey(gw.deps.db, a.accountId, 'k', { projectId: p.id })).key;
  const inProject = await stored(await ask(pk, fresh('purge project')));
  const other = await stored(await ask(a.key, fresh('other project')));
  expect((await del(pk, `/v1/cache/entries?project_id=${p.id}`)).status).toBe(403);
  const r3 = await del(aa, `/v1/cache/entries?project_id=${p.id}`);
  expect(await r3.json()).toEqual({ object: 'cache.purge', project_id: p.id, deleted: 1 });
  expect(await redis.exists(`${prefix}e:${inProject}`)).toBe(0);
  expect(await redis.exists(`${prefix}e:${other}`)).toBe(1);
});

test('another API process finds an entry: one started later at once, one running within its poll', async () => {
  const cache = { ...loadConfig().cache, redisPrefix: prefix, hitPriceVnd: HIT_PRICE, timeoutMs: 1000 };
  const start = (rl: string) =>
    startGateway(
      { logLevel: 'silent', redisUrl: REDIS, redisKeyPrefix: `${prefix}${rl}:`, cache },
      { temporal: false },
    );
  const running = await start('rl3');
  let late: TestGateway | null = null;
  try {
    const a = await gw.account();
    const content = fresh('Seen elsewhere');
    const key = await stored(await ask(a.key, content));
    // The running process does not ask (a miss would store the answer itself): it looks until its index has the
    // key, which its poll (every second) takes in from the other process's write.
    const deadline = Date.now() + 15_000;
    for (;;) {
      const e = await running.deps.cache!.lookup(key);
      if (e && e !== 'error') break;
      if (Date.now() > deadline) throw new Error('the running process never found the entry the other wrote');
      await new Promise((r) => setTimeout(r, 50));
    }
    const there = await post(
      `${running.url}/v1/chat/completions`,
      { model: 'gpt-4o-mini', messages: [{ role: 'user', content }] },
      { key: a.key, headers: { 'x-gateway-cache': 'ttl=120' } },
    );
    expect(there.headers.get('x-gateway-cache')).toBe('hit');
    expect(there.body).toEqual((await ask(a.key, content)).body);
    // The running process answered that hit from its memory of recent hits, which it keeps a second at a time: a
    // purge made through the other process reaches it (its next lookup asks Redis, which has nothing).
    const admin = (await createAdminKey(gw.deps.db, a.accountId)).value;
    const purged = await fetch(`${gw.url}/v1/cache/entries/${key}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${admin}` },
    });
    expect(purged.status).toBe(200);
    const gone = Date.now() + 15_000;
    while ((await running.deps.cache!.lookup(key)) !== null) {
      if (Date.now() > gone) throw new Error('the running process kept answering a purged entry');
      await new Promise((r) => setTimeout(r, 50));
    }
    // Stored again for the process started next.
    expect((await ask(a.key, content)).headers.get('x-gateway-cache')).toBe('miss');
    await stored(await ask(a.key, content));
    // A process started after the write finds it as soon as it is connected to Redis (until then every lookup is
    // an error, answered as a miss): by its SCAN of the entries, or a lookup until the SCAN has ended.
    late = await start('rl4');
    const connected = Date.now() + 15_000;
    let seen = await late.deps.cache!.lookup(key);
    while (seen === 'error' && Date.now() < connected) {
      await new Promise((r) => setTimeout(r, 20));
      seen = await late.deps.cache!.lookup(key);
    }
    expect(seen && seen !== 'error' && seen.key).toBe(key);
    const first = await post(
      `${late.url}/v1/chat/completions`,
      { model: 'gpt-4o-mini', messages: [{ role: 'user', content }] },
      { key: a.key, headers: { 'x-gateway-cache': 'ttl=120' } },
    );
    expect(first.headers.get('x-gateway-cache')).toBe('hit');
    // Another account's same request is never theirs.
    const b = await gw.account();
    const theirs = await post(
      `${late.url}/v1/chat/completions`,
      { model: 'gpt-4o-mini', messages: [{ role: 'user', content }] },
      { key: b.key, headers: { 'x-gateway-cache': 'ttl=120' } },
    );
    expect(theirs.headers.get('x-gateway-cache')).toBe('miss');
  } finally {
    await running.close();
    await late?.close();
  }
});

test('Redis down: every request is a miss answered by the upstream, never an error', async () => {
  const cache = { ...loadConfig().cache, redisPrefix: prefix, timeoutMs: 200 };
  // A port nothing listens on: the cache's commands fail at once (no offline queue).
  const down = await startGateway(
    { logLevel: 'silent', redisUrl: 'redis://127.0.0.1:1', redisKeyPrefix: `${prefix}rl2:`, cache },
    { temporal: false },
  );
  try {
    const a = await down.account();
    const c = new OpenAI({
      apiKey: a.key,
      baseURL: `${down.url}/v1`,
      maxRetries: 0,
      defaultHeaders: { 'x-gateway-cache': 'ttl=60' },
    });
    const content = fresh('Is anyone there?');
    for (let i = 0; i < 2; i++) {
      const r = await c.chat.completions
        .create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content }] })
        .withResponse();
      expect(r.response.headers.get('x-gateway-cache')).toBe('miss');
      expect(r.data.choices[0].message.content).toContain('Is anyone there?');
    }
  } finally {
    await down.close();
  }
});
