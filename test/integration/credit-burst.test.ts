import { randomUUID } from 'node:crypto';
import OpenAI from 'openai';
import { createPool, type Db } from '../../src/db/pool';
import { createAccount, getBalance, topUp, verifyProjections } from '../../src/billing/ledger';
import { createApiKey } from '../../src/auth/apiKeys';
import { setKeyLimits } from '../../src/limits/keyLimits';
import { startEmulator, type Emulator } from '../../emulator/server';
import { spawnTsChild, type TsChild } from '../support/tsChild';
import { eventually } from '../support/video';

/**
 * Bursts of concurrent chat requests (mixed models, half streamed) over three API processes, each with its own
 * credit leases, on one account: when the balance (or the key's budget) covers every request at its maximum cost,
 * none is refused, whichever process leased what; and a refusal's message never says the funds were there.
 */

let db: Db;
let emulator: Emulator;
let apis: TsChild[] = [];
let urls: string[] = [];

beforeAll(async () => {
  db = createPool(process.env.DATABASE_URL!, 5);
  emulator = await startEmulator();
  emulator.control.settings.latencyMs = 30;
  const env = {
    DATABASE_URL: process.env.DATABASE_URL,
    TEMPORAL_ADDRESS: 'off',
    EMULATOR_URL: emulator.url,
    LOG_LEVEL: 'silent',
    REDIS_URL: '',
  };
  apis = await Promise.all([0, 1, 2].map(() => spawnTsChild('apiChild.ts', env)));
  urls = apis.map((a) => `http://127.0.0.1:${a.firstLine.trim()}`);
}, 120_000);

afterAll(async () => {
  await Promise.all(apis.map((a) => a.kill('SIGTERM')));
  await emulator?.close();
  await db?.end();
});

interface Shape {
  model: string;
  max_tokens: number;
  stream: boolean;
  content: string;
}

/** Twelve request shapes: four models (OpenAI and Anthropic upstreams), prompts and caps of different sizes. */
const SHAPES: Shape[] = ['gpt-4o-mini', 'gpt-4o', 'claude-haiku-4-5', 'o4-mini'].flatMap((model, m) =>
  [0, 1, 2].map((k) => ({
    model,
    max_tokens: 40 + 70 * k + 11 * m,
    stream: (m + k) % 2 === 0,
    content: `question ${m}/${k}: ` + 'tell me more. '.repeat(5 + 40 * k),
  })),
);

async function keyFor(balance: number, limits: Parameters<typeof setKeyLimits>[3] = {}) {
  const accountId = await createAccount(db, 'burst');
  if (balance > 0) await topUp(db, { accountId, amount: balance, idempotencyKey: `t:${randomUUID()}` });
  const k = await createApiKey(db, accountId, 'burst');
  if (Object.keys(limits).length) await setKeyLimits(db, accountId, k.id, limits);
  return { accountId, keyId: k.id, key: k.key };
}

async function call(client: OpenAI, s: Shape): Promise<void> {
  const messages = [{ role: 'user' as const, content: s.content }];
  if (!s.stream) {
    await client.chat.completions.create({ model: s.model, max_tokens: s.max_tokens, messages });
    return;
  }
  const stream = await client.chat.completions.create({
    model: s.model,
    max_tokens: s.max_tokens,
    messages,
    stream: true,
    stream_options: { include_usage: true },
  });
  for await (const chunk of stream) void chunk;
}

/** What the gateway reserves for each shape: the "needs up to N VND" of a refusal on an empty account. */
async function maxCosts(): Promise<number[]> {
  const { key } = await keyFor(0);
  const client = new OpenAI({ apiKey: key, baseURL: `${urls[0]}/v1`, maxRetries: 0 });
  const out: number[] = [];
  for (const s of SHAPES) {
    const e = await call(client, s).then(
      () => null,
      (err) => err,
    );
    const m = /needs up to (\d+) VND/.exec(String(e?.message));
    if (e?.status !== 402 || !m) throw new Error(`probe of ${s.model}: ${e?.status} ${e?.message}`);
    out.push(Number(m[1]));
  }
  return out;
}

/** `n` concurrent requests, shape i % 12, round-robin over the three processes; the refusals' statuses and messages. */
async function burst(key: string, n: number) {
  const clients = urls.map((u) => new OpenAI({ apiKey: key, baseURL: `${u}/v1`, maxRetries: 0 }));
  const results = await Promise.allSettled(
    Array.from({ length: n }, (_, i) => call(clients[i % 3], SHAPES[i % SHAPES.length])),
  );
  const errors = results
    .filter((r): r is PromiseRejectedResult => r.status === 'rejected')
    .map((r) => r.reason as { status?: number; message?: string; code?: string });
  return { ok: n - errors.length, errors };
}

/** A refusal's own figures: what the request needs and what it says is left. */
function figures(message: string): { needed: number; left: number } {
  const m = /needs up to (\d+) VND, (\d+) VND/.exec(message);
  if (!m) throw new Error(`no figures in ${JSON.stringify(message)}`);
  return { needed: Number(m[1]), left: Number(m[2]) };
}

/** Mismatches, leaving out other keys' budget periods (a concurrent suite may move BUDGET_TIME_ZONE for its own). */
async function mismatches(keyId: string) {
  return (await verifyProjections(db)).filter(
    (m) => !m.accountId.startsWith('key-spend:') || m.accountId.includes(keyId),
  );
}

const sumOf = (costs: number[], n: number) =>
  Array.from({ length: n }, (_, i) => costs[i % costs.length]).reduce((a, b) => a + b, 0);

test('300 concurrent requests over three processes, an account covering them all at most: no 402', async () => {
  const costs = await maxCosts();
  const { accountId, key, keyId } = await keyFor(sumOf(costs, 300));
  const { ok, errors } = await burst(key, 300);
  expect(errors.map((e) => `${e.status} ${e.message}`)).toEqual([]);
  expect(ok).toBe(300);
  await eventually(async () => (await getBalance(db, accountId))!.held === 0);
  expect(await mismatches(keyId)).toEqual([]);
}, 120_000);

test('300 concurrent requests over three processes, a key whose daily budget covers them all: no 402', async () => {
  const costs = await maxCosts();
  const { key, keyId } = await keyFor(10_000_000, { budgetDayVnd: sumOf(costs, 300) });
  const { ok, errors } = await burst(key, 300);
  expect(errors.map((e) => `${e.status} ${e.message}`)).toEqual([]);
  expect(ok).toBe(300);
  await eventually(
    async () =>
      (await db.query(`SELECT count(*)::int AS n FROM holds WHERE api_key_id = $1 AND status = 'open'`, [keyId]))
        .rows[0].n === 0,
  );
  expect(await mismatches(keyId)).toEqual([]);
}, 120_000);

test('an account or budget covering part of a burst: each refusal says less is left than needed', async () => {
  const costs = await maxCosts();
  const poor = await keyFor(sumOf(costs, 30));
  const tight = await keyFor(10_000_000, { budgetDayVnd: sumOf(costs, 30) });
  for (const [who, code] of [
    [poor, 'insufficient_balance'],
    [tight, 'budget_exceeded'],
  ] as const) {
    const { ok, errors } = await burst(who.key, 200);
    expect(ok).toBeGreaterThan(0);
    expect(errors.length).toBeGreaterThan(0);
    for (const e of errors) {
      expect([e.status, e.code]).toEqual([402, code]);
      const f = figures(e.message!);
      if (f.left >= f.needed) throw new Error(`a refusal that contradicts itself: ${e.message}`);
    }
  }
}, 120_000);
