import net from 'node:net';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import OpenAI from 'openai';
import Redis from 'ioredis';
import { createPool, type Db } from '../../src/db/pool';
import { createAccount, getBalance, topUp, verifyProjections } from '../../src/billing/ledger';
import { createApiKey } from '../../src/auth/apiKeys';
import { BUDGET_FENCE_MARGIN_MS, setKeyLimits, untilBudgetBinds, type LimitsSaved } from '../../src/limits/keyLimits';
import { startEmulator, type Emulator } from '../../emulator/server';
import { spawnTsChild, type TsChild } from '../support/tsChild';
import { eventually } from '../support/video';
import { freePort } from '../support/http';

/**
 * Three API processes (src/server.ts, each its own node process) on one database and one Redis. Limits hold for
 * the key as a whole, not per process; budgets hold on the ledger; and with Redis gone the processes keep serving
 * and keep limiting, each on its own. The Redis here is this test's own redis-server on a free port (stopping the
 * machine's shared one would disturb other runs).
 */

let db: Db;
let emulator: Emulator;
let redis: ChildProcess;
let redisPort: number;
let apis: TsChild[] = [];
let urls: string[] = [];

/** The rate-limit mode a process reports in /readyz. */
async function limiterMode(url: string): Promise<string> {
  const body = (await (await fetch(`${url}/readyz`)).json()) as { checks: Record<string, string> };
  return body.checks.ratelimit;
}

async function startRedis(): Promise<void> {
  redis = spawn(
    'redis-server',
    ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    { stdio: 'ignore' },
  );
  await eventually(
    () =>
      new Promise<boolean>((resolve) => {
        const c = net.connect(redisPort, '127.0.0.1', () => {
          c.destroy();
          resolve(true);
        });
        c.on('error', () => resolve(false));
      }),
  );
}

async function stopRedis(): Promise<void> {
  if (redis.exitCode !== null || redis.signalCode !== null) return;
  await new Promise<void>((r) => {
    redis.once('exit', () => r());
    redis.kill('SIGKILL');
  });
}

beforeAll(async () => {
  db = createPool(process.env.DATABASE_URL!, 10);
  emulator = await startEmulator();
  redisPort = await freePort();
  await startRedis();
  const env = {
    DATABASE_URL: process.env.DATABASE_URL,
    REDIS_URL: `redis://127.0.0.1:${redisPort}`,
    REDIS_KEY_PREFIX: `gw-test:${randomUUID()}:`,
    TEMPORAL_ADDRESS: 'off',
    EMULATOR_URL: emulator.url,
    LOG_LEVEL: 'silent',
    KEY_CACHE_MS: '200',
    CREDIT_FLUSH_MS: '50',
  };
  apis = await Promise.all([0, 1, 2].map(() => spawnTsChild('apiChild.ts', env)));
  urls = apis.map((a) => `http://127.0.0.1:${a.firstLine.trim()}`);
  // Each process reports the shared limiter once it reaches Redis.
  for (const u of urls) await eventually(async () => (await limiterMode(u)) === 'redis');
}, 120_000);

afterAll(async () => {
  await Promise.all(apis.map((a) => a.kill('SIGTERM')));
  await stopRedis();
  await emulator?.close();
  await db?.end();
});

async function keyWith(
  limits: Parameters<typeof setKeyLimits>[3],
  balance = 1_000_000,
): Promise<{ accountId: string; keyId: string; key: string }> {
  const accountId = await createAccount(db, 'multi-process');
  await topUp(db, { accountId, amount: balance, idempotencyKey: `t:${randomUUID()}` });
  const k = await createApiKey(db, accountId, 'burst');
  await setKeyLimits(db, accountId, k.id, limits);
  return { accountId, keyId: k.id, key: k.key };
}

/** `n` concurrent chat requests spread round-robin over the three processes. */
async function burst(key: string, n: number, body: { model: string; max_tokens: number }, content = 'hello') {
  const clients = urls.map((u) => new OpenAI({ apiKey: key, baseURL: `${u}/v1`, maxRetries: 0 }));
  const results = await Promise.allSettled(
    Array.from({ length: n }, (_, i) =>
      clients[i % 3].chat.completions.create({ ...body, messages: [{ role: 'user', content }] }).withResponse(),
    ),
  );
  const ok = results.filter((r) => r.status === 'fulfilled').length;
  const errors = results.filter((r) => r.status === 'rejected').map((r) => (r as PromiseRejectedResult).reason);
  return {
    ok,
    errors,
    perProcess: [0, 1, 2].map((p) => results.filter((r, i) => i % 3 === p && r.status === 'fulfilled').length),
  };
}

test("a burst over a key's RPM across three processes admits exactly the limit", async () => {
  const { key } = await keyWith({ rpm: 10 });
  const before = emulator.control.requests.length;
  const { ok, errors } = await burst(key, 45, { model: 'gpt-4o-mini', max_tokens: 10 });
  expect(ok).toBe(10);
  expect(errors).toHaveLength(35);
  for (const e of errors) expect([e.status, e.code]).toEqual([429, 'rate_limit_exceeded']);
  expect(emulator.control.requests.length - before).toBe(10);
});

test("a burst over a key's TPM across three processes admits exactly what the token bound allows", async () => {
  // The bound of one request, read from the tokens header of a key whose window is empty.
  const probe = await keyWith({ tpm: 1_000_000 });
  const first = await new OpenAI({ apiKey: probe.key, baseURL: `${urls[0]}/v1`, maxRetries: 0 }).chat.completions
    .create({ model: 'gpt-4o-mini', max_tokens: 100, messages: [{ role: 'user', content: 'hello' }] })
    .withResponse();
  const bound = 1_000_000 - Number(first.response.headers.get('x-ratelimit-remaining-tokens'));
  expect(bound).toBeGreaterThan(100);
  // Upstream answers held back, so no request settles (and frees its unused tokens) during the burst.
  emulator.control.settings.latencyMs = 1500;
  try {
    const { key } = await keyWith({ tpm: 4 * bound + Math.floor(bound / 2) });
    const { ok, errors } = await burst(key, 24, { model: 'gpt-4o-mini', max_tokens: 100 });
    expect(ok).toBe(4);
    for (const e of errors) expect([e.status, e.code]).toEqual([429, 'rate_limit_exceeded']);
  } finally {
    emulator.control.settings.latencyMs = 0;
  }
});

test('a concurrent burst against a daily budget across three processes never spends more than the budget', async () => {
  const budget = 1_000;
  const { accountId, keyId, key } = await keyWith({ budgetDayVnd: budget });
  // gpt-4o, a 4000-character prompt, max_tokens 5: each reserves ~265 VND and costs ~67 (the emulator counts 4
  // characters a token). Bursts of 30 run into the reservations in flight at once, and over the rounds the spend
  // itself reaches the budget, after which everything is refused.
  const rounds = [];
  for (let i = 0; i < 30 && rounds.at(-1)?.ok !== 0; i++)
    rounds.push(await burst(key, 30, { model: 'gpt-4o', max_tokens: 5 }, 'x'.repeat(4000)));
  expect(rounds.at(-1)!.ok).toBe(0);
  const errors = rounds.flatMap((r) => r.errors);
  for (const e of errors) expect([e.status, e.code]).toEqual([402, 'budget_exceeded']);
  await eventually(
    async () =>
      (await db.query(`SELECT count(*)::int AS n FROM holds WHERE api_key_id = $1 AND status = 'open'`, [keyId]))
        .rows[0].n === 0,
  );
  const spent = (
    await db.query('SELECT COALESCE(sum(cost_vnd), 0)::int AS v FROM usage_records WHERE api_key_id = $1', [keyId])
  ).rows[0].v;
  const ledger =
    (await db.query(`SELECT spent_vnd FROM api_key_spend WHERE api_key_id = $1 AND period LIKE 'day:%'`, [keyId]))
      .rows[0]?.spent_vnd ?? 0;
  expect(spent).toBeGreaterThan(0);
  expect(spent).toBeLessThanOrEqual(budget);
  expect(ledger).toBe(spent);
  expect((await getBalance(db, accountId))!.balance).toBe(1_000_000 - spent);
  expect(await verifyProjections(db)).toEqual([]);
}, 120_000);

test('a budget set while the key uses shared leases binds once saved: in-flight requests count', async () => {
  const { accountId, keyId, key } = await keyWith({});
  const body = { model: 'gpt-4o', max_tokens: 5 };
  const prompt = 'x'.repeat(4000); // reserves ~265 VND, costs ~67 (see the daily budget test)
  // Warm: every process caches the key's settings (no budget) and serves it from the account's shared lease.
  expect((await burst(key, 6, body, prompt)).ok).toBe(6);
  // Thirty more, held upstream for 2.5 s: in flight on the shared leases while the budget is set.
  emulator.control.reset();
  emulator.control.addFault({ match: 'POST /openai/v1/chat/completions', delayMs: 2_500, times: 30 });
  let slowDoneAt = 0;
  const slow = burst(key, 30, body, prompt).finally(() => {
    slowDoneAt = Date.now();
  });
  await eventually(async () => emulator.control.faultsApplied === 30);
  const usage = async () =>
    (
      await db.query(
        'SELECT count(*)::int AS n, COALESCE(sum(cost_vnd), 0)::int AS v FROM usage_records WHERE api_key_id = $1',
        [keyId],
      )
    ).rows[0] as { n: number; v: number };
  await eventually(async () => (await usage()).n === 6);
  // What the slow thirty will cost, and room for about one more request's reservation: a budget that ignored them
  // (granting its room to later requests while they are still in flight) would be passed when they settle.
  const warm = (await usage()).v;
  const budget = warm + (warm / 6) * 30 + 330;
  const keyCacheMs = 200; // KEY_CACHE_MS of the processes
  const saved = await setKeyLimits(db, accountId, keyId, { budgetDayVnd: budget }, keyCacheMs);
  expect(saved).toEqual({ bindsInMs: keyCacheMs + BUDGET_FENCE_MARGIN_MS });
  await untilBudgetBinds(saved as LimitsSaved);
  // Saved: bursts now, while the thirty are still in flight, and after, until the budget refuses everything.
  const rounds = [];
  for (let i = 0; i < 80; i++) {
    const startedAt = Date.now();
    const r = await burst(key, 15, body, prompt);
    rounds.push(r);
    // Done once refused after the shared leases were returned (the flush after the slow ones ended).
    if (r.ok === 0 && slowDoneAt && startedAt > slowDoneAt + 500) break;
    if (r.ok === 0) await new Promise((res) => setTimeout(res, 100));
  }
  expect((await slow).ok).toBe(30);
  expect(rounds.at(-1)!.ok).toBe(0);
  expect(rounds.reduce((n, r) => n + r.ok, 0)).toBeGreaterThan(0);
  for (const e of rounds.flatMap((r) => r.errors)) expect([e.status, e.code]).toEqual([402, 'budget_exceeded']);
  const served = 6 + 30 + rounds.reduce((n, r) => n + r.ok, 0);
  await eventually(async () => (await usage()).n === served);
  const spent = (await usage()).v;
  expect(spent).toBeLessThanOrEqual(budget);
  const ledger = (
    await db.query(`SELECT spent_vnd FROM api_key_spend WHERE api_key_id = $1 AND period LIKE 'day:%'`, [keyId])
  ).rows[0].spent_vnd;
  expect(Number(ledger)).toBe(spent);
  expect(await verifyProjections(db)).toEqual([]);
}, 120_000);

/** Script calls this test's Redis has served so far. */
async function redisScriptCalls(): Promise<number> {
  const r = new Redis(redisPort, '127.0.0.1', { lazyConnect: true });
  try {
    await r.connect();
    const info = await r.info('commandstats');
    return [...info.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)].reduce((n, m) => n + Number(m[1]), 0);
  } finally {
    r.disconnect();
  }
}

/** A process's count of refusals while room sat in other processes' slices. */
async function sliceRefusals(url: string): Promise<number> {
  const m = /^gateway_ratelimit_slice_refusals_total (\d+)$/m.exec(await (await fetch(`${url}/metrics`)).text());
  return Number(m![1]);
}

/** `count` chat requests to one process, `concurrency` at a time; the answers' statuses and Retry-After-Ms. */
async function sustained(key: string, process: number, concurrency: number, count: number) {
  const client = new OpenAI({ apiKey: key, baseURL: `${urls[process]}/v1`, maxRetries: 0 });
  const answers: { status: number; retryMs: number; code?: string }[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next++ < count) {
        answers.push(
          await client.chat.completions
            .create({ model: 'gpt-4o-mini', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] })
            .then(
              () => ({ status: 200, retryMs: 0 }),
              (e) => ({ status: e.status, retryMs: Number(e.headers?.get('retry-after-ms')), code: e.code }),
            ),
        );
      }
    }),
  );
  return { ok: answers.filter((a) => a.status === 200).length, answers };
}

test('requests are admitted from slices leased ahead: a few Redis calls, not one per request', async () => {
  const { key } = await keyWith({ rpm: 1_000_000, tpm: 1_000_000_000 });
  const before = await redisScriptCalls();
  const runs = await Promise.all([0, 1, 2].map((p) => sustained(key, p, 4, 200)));
  const calls = (await redisScriptCalls()) - before;
  expect(runs.map((r) => r.ok)).toEqual([200, 200, 200]);
  // Leased slices: about one call per slice of 16 or more requests, far below one per request (600).
  expect(calls).toBeLessThan(600 / 4);
}, 120_000);

test('leased slices stay exact across processes: never past the limit, unused room returned', async () => {
  const rpm = 320;
  const { key } = await keyWith({ rpm });
  const refusalsBefore = await Promise.all(urls.map(sliceRefusals));
  // Process 0 runs steadily (so it holds slices leased ahead of need) while bursts on the others fill the window.
  const steady = sustained(key, 0, 2, 150);
  await new Promise((r) => setTimeout(r, 300));
  const bursts = await Promise.all([1, 2].map((p) => sustained(key, p, 100, 200)));
  const all = [await steady, ...bursts];
  const admitted = all.reduce((n, r) => n + r.ok, 0);
  expect(admitted).toBeLessThanOrEqual(rpm);
  const refused = all.flatMap((r) => r.answers.filter((a) => a.status !== 200));
  expect(refused.length).toBe(550 - admitted);
  for (const a of refused) expect(a).toMatchObject({ status: 429, code: 'rate_limit_exceeded' });
  // Refusals while room sat in process 0's slices are counted, and told to retry when such a slice ends.
  const refusalsAfter = await Promise.all(urls.map(sliceRefusals));
  expect(refusalsAfter[1] + refusalsAfter[2] - refusalsBefore[1] - refusalsBefore[2]).toBeGreaterThan(0);
  expect(Math.min(...refused.map((a) => a.retryMs))).toBeLessThanOrEqual(2000);
  // Idle slices go back to the window: one process alone then gets exactly the rest of the limit.
  await new Promise((r) => setTimeout(r, 2500));
  const rest = await sustained(key, 1, 1, rpm - admitted + 5);
  expect(rest.ok).toBe(rpm - admitted);
  expect(rest.answers.slice(-5).map((a) => a.status)).toEqual([429, 429, 429, 429, 429]);
}, 120_000);

test('a lowered limit binds at once: slices leased under the old one admit nothing more', async () => {
  const { accountId, keyId, key } = await keyWith({ rpm: 640 });
  // Process 0 leases ahead of need (up to 640 / 64 requests a slice) while it serves these.
  expect((await sustained(key, 0, 1, 2)).ok).toBe(2);
  await setKeyLimits(db, accountId, keyId, { rpm: 3 });
  await new Promise((r) => setTimeout(r, 300)); // KEY_CACHE_MS of the processes
  const after = await sustained(key, 0, 1, 5);
  expect(after.answers.map((a) => a.status)).toEqual([200, 429, 429, 429, 429]);
}, 60_000);

test('Redis killed with requests in flight: each answered (none 5xx), serving goes on, /readyz says so', async () => {
  const { key } = await keyWith({ rpm: 1_000, tpm: 10_000_000 });
  const clients = urls.map((u) => new OpenAI({ apiKey: key, baseURL: `${u}/v1`, maxRetries: 0 }));
  const call = (i: number) =>
    clients[i % 3].chat.completions
      .create({ model: 'gpt-4o-mini', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] })
      .then(
        () => 200,
        (e) => e.status ?? String(e),
      );
  emulator.control.settings.latencyMs = 100; // so that requests are in flight (checked, waiting upstream) at the kill
  try {
    const answers: Promise<number | string>[] = [];
    for (let i = 0; i < 60; i++) {
      answers.push(call(i));
      if (i === 20) void stopRedis();
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(await Promise.all(answers)).toEqual(Array(60).fill(200)); // well under the limits, per process too
    for (const u of urls) {
      await eventually(async () => (await limiterMode(u)) === 'memory (redis unreachable)');
      expect((await fetch(`${u}/readyz`)).status).toBe(200);
      // The requests after the kill were decided in-process, and counted as such.
      expect(await (await fetch(`${u}/metrics`)).text()).toMatch(/^gateway_ratelimit_local_decisions_total [1-9]/m);
    }
    expect(await Promise.all([0, 1, 2].map(call))).toEqual([200, 200, 200]);
  } finally {
    emulator.control.settings.latencyMs = 0;
    await startRedis();
    for (const u of urls) await eventually(async () => (await limiterMode(u)) === 'redis');
  }
}, 60_000);

test('Redis stopped mid-test: every process keeps serving and keeps limiting, per process, and says so', async () => {
  const { key } = await keyWith({ rpm: 2 });
  const before = await burst(key, 9, { model: 'gpt-4o-mini', max_tokens: 10 });
  expect(before.ok).toBe(2); // shared: two for the key in all

  await stopRedis();
  for (const u of urls) await eventually(async () => (await limiterMode(u)) === 'memory (redis unreachable)');
  for (const u of urls) {
    const r = await fetch(`${u}/readyz`);
    expect(r.status).toBe(200); // still ready: serving goes on
    expect(await (await fetch(`${u}/metrics`)).text()).toMatch(/^gateway_ratelimit_redis_up 0$/m);
  }
  const { key: other } = await keyWith({ rpm: 2 });
  const during = await burst(other, 12, { model: 'gpt-4o-mini', max_tokens: 10 });
  // Each process now grants the key's limit on its own: still limited (never open), never a 500.
  expect(during.perProcess).toEqual([2, 2, 2]);
  for (const e of during.errors) expect([e.status, e.code]).toEqual([429, 'rate_limit_exceeded']);
  for (const u of urls)
    expect(await (await fetch(`${u}/metrics`)).text()).toMatch(/^gateway_ratelimit_local_decisions_total [1-9]/m);

  // Redis back: the processes reconnect and share the window again.
  await startRedis();
  for (const u of urls) await eventually(async () => (await limiterMode(u)) === 'redis');
  const { key: third } = await keyWith({ rpm: 3 });
  expect((await burst(third, 12, { model: 'gpt-4o-mini', max_tokens: 10 })).ok).toBe(3);
}, 120_000);
