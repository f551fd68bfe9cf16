import { randomUUID } from 'node:crypto';
import OpenAI from 'openai';
import { createPool, type Db } from '../../src/db/pool';
import { CreditManager, type UsageInput } from '../../src/modelCall/credit';
import { getBalance, verifyProjections } from '../../src/billing/ledger';
import { createApiKey } from '../../src/auth/apiKeys';
import { startEmulator, type Emulator } from '../../emulator/server';
import { fundedAccount } from '../support/records';
import { startGateway } from '../support/gateway';
import { spawnTsChild, type TsChild } from '../support/tsChild';
import { eventually } from '../support/video';
import { freePort, sleep } from '../support/http';

/**
 * The life of a credit lease at its edges: retired (aged or fenced) while a request on it is still open, it gives
 * back at once what that request did not reserve; a process stopped cleanly returns its leases; a process killed
 * has its leases recovered by another within the liveness window, not at their hold's expiry an hour later. Money
 * stays exact throughout.
 */

let db: Db;
let emulator: Emulator;
const children: TsChild[] = [];
beforeAll(async () => {
  db = createPool(process.env.DATABASE_URL!, 10);
  emulator = await startEmulator();
});
afterAll(async () => {
  await Promise.all(children.map((c) => c.kill('SIGKILL')));
  await emulator?.close();
  await db?.end();
});

const usage = (): UsageInput => ({
  id: randomUUID(),
  apiKeyId: null,
  model: 'm',
  operation: 'chat',
  units: { prompt_tokens: 1 },
  latencyMs: 1,
  status: 200,
});

describe('a lease retired while a request on it is open', () => {
  const TTL_MS = 300;
  test.each([
    ['aged past its rotation (a long stream open across it)', 'ttl'],
    ['passed by the budget fence', 'fence'],
  ])('%s gives back its unreserved remainder at once', async (_, how) => {
    const acc = await fundedAccount(db, 30_000, 'lease-retire');
    const credit = new CreditManager(db, { leaseVnd: 20_000, leaseTtlMs: TTL_MS, flushMs: 60_000 });
    try {
      const stream = await credit.reserve(acc, 100); // the lease takes 20,000; the stream keeps 100 of it open
      expect(await getBalance(db, acc)).toMatchObject({ held: 20_000 });
      let next;
      if (how === 'ttl') {
        await sleep(TTL_MS + 50); // the lease has aged: the next request rotates it
        next = await credit.reserve(acc, 15_000);
      } else {
        // A fence falls after the lease's placement only on a later millisecond: on a fast machine the stream's
        // reservation and the balance read can take under one.
        await sleep(5);
        next = await credit.reserve(acc, 15_000, null, Date.now() - 1);
      }
      // The retired lease keeps only the stream's 100 VND; the new one took a whole lease.
      expect(await getBalance(db, acc)).toEqual({ balance: 30_000, held: 100 + 20_000, available: 9_900 });
      next.settle(14_000, usage());
      stream.settle(250, usage()); // the stream ends above its reservation: the rest is collected from free funds
      await credit.close();
      expect(await getBalance(db, acc)).toEqual({ balance: 30_000 - 14_250, held: 0, available: 15_750 });
      expect(await verifyProjections(db)).toEqual([]);
    } finally {
      await credit.close();
    }
  });

  test('what the open requests of a retired lease leave when they settle goes back at the next flush', async () => {
    const acc = await fundedAccount(db, 30_000, 'lease-drain');
    const credit = new CreditManager(db, { leaseVnd: 20_000, flushMs: 60_000 });
    try {
      const long = await credit.reserve(acc, 100);
      const short = await credit.reserve(acc, 5_000);
      await sleep(5); // the fence below must fall after the lease's placement (a later millisecond)
      await credit.reserve(acc, 1_000, null, Date.now() - 1).then((r) => r.cancel()); // fence: the lease retires
      expect(await getBalance(db, acc)).toMatchObject({ held: 5_100 + 20_000 });
      short.settle(1_000, usage()); // 4,000 of its reservation are unused
      await credit.flush();
      expect(await getBalance(db, acc)).toMatchObject({ balance: 29_000, held: 100 + 20_000 });
      long.settle(100, usage());
      await credit.close();
      expect(await getBalance(db, acc)).toEqual({ balance: 28_900, held: 0, available: 28_900 });
      expect(await verifyProjections(db)).toEqual([]);
    } finally {
      await credit.close();
    }
  });
});

test('a long stream open across a lease rotation holds only its reservation', async () => {
  const TTL_MS = 500;
  const gw = await startGateway(
    { creditLeaseVnd: 20_000, creditLeaseTtlMs: TTL_MS, logLevel: 'silent' },
    { temporal: false },
  );
  try {
    const { accountId, key } = await gw.account(30_000);
    const client = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    // Slow chunks: the stream stays open past the rotation and past the wait of a refused request (2 s here).
    gw.emulator.control.settings.chunkDelayMs = 1_500;
    const stream = await client.chat.completions.create({
      model: 'gpt-4o-mini',
      max_tokens: 100,
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: 'user', content: 'hello' }],
    });
    const it = stream[Symbol.asyncIterator]();
    await it.next(); // the stream is open, its reservation on the first lease (20,000 of the 30,000)
    gw.emulator.control.settings.chunkDelayMs = 0;
    await sleep(TTL_MS + 100); // the lease has aged: the next request rotates it
    // About 15,000 VND reserved: more than the 10,000 the account has beside the first lease.
    const big = await client.chat.completions.create({
      model: 'claude-opus-4-6',
      max_tokens: 23_000,
      messages: [{ role: 'user', content: 'hello' }],
    });
    expect(big.choices[0].message.content).toBeTruthy();
    while (!(await it.next()).done); // the stream ends normally
    await gw.deps.credit.flush();
    const charged = await gw.deps.db.query(
      `SELECT count(*)::int AS n, COALESCE(sum(cost_vnd), 0)::int AS v FROM usage_records WHERE account_id = $1`,
      [accountId],
    );
    expect(charged.rows[0].n).toBe(2);
    const b = (await getBalance(gw.deps.db, accountId))!;
    expect(b.balance).toBe(30_000 - charged.rows[0].v);
  } finally {
    await gw.close();
  }
  expect(await verifyProjections(db)).toEqual([]);
}, 60_000);

describe('an API process that stops', () => {
  // Above a lease (CREDIT_LEASE_VND, 20,000), so that the lease is granted whole and kept (a lease granted less
  // goes lean and gives back at each flush).
  const BALANCE = 100_000;
  let accountId: string;
  let key: string;
  const env = () => ({
    DATABASE_URL: process.env.DATABASE_URL,
    TEMPORAL_ADDRESS: 'off',
    EMULATOR_URL: emulator.url,
    CREDIT_FLUSH_MS: '50',
    CREDIT_LIVENESS_MS: '200',
  });
  /** `npm run api` itself (src/server.ts as the entry point), on a port of its own. */
  async function startServer(): Promise<{ proc: TsChild; url: string }> {
    const port = await freePort();
    const proc = await spawnTsChild('../../src/server.ts', { ...env(), PORT: String(port), LOG_LEVEL: 'info' });
    children.push(proc);
    const url = `http://127.0.0.1:${port}`;
    await eventually(async () => (await fetch(`${url}/readyz`)).ok);
    return { proc, url };
  }
  /** test/support/apiChild.ts, which prints its port. */
  async function startChild(): Promise<{ proc: TsChild; url: string }> {
    const proc = await spawnTsChild('apiChild.ts', { ...env(), LOG_LEVEL: 'silent' });
    children.push(proc);
    return { proc, url: `http://127.0.0.1:${proc.firstLine.trim()}` };
  }
  async function chat(url: string): Promise<void> {
    const client = new OpenAI({ apiKey: key, baseURL: `${url}/v1`, maxRetries: 0 });
    await client.chat.completions.create({
      model: 'gpt-4o-mini',
      max_tokens: 10,
      messages: [{ role: 'user', content: 'hello' }],
    });
  }
  const held = async () => (await getBalance(db, accountId))!.held;
  const usageCount = async () =>
    (await db.query('SELECT count(*)::int AS n FROM usage_records WHERE account_id = $1', [accountId])).rows[0].n;
  const exited = (p: TsChild) =>
    new Promise<number | null>((r) =>
      p.child.exitCode !== null || p.child.signalCode !== null ? r(p.child.exitCode) : p.child.once('exit', r),
    );

  beforeAll(async () => {
    accountId = await fundedAccount(db, BALANCE, 'lease-restart');
    key = (await createApiKey(db, accountId, 'restart')).key;
  });

  test('cleanly (Ctrl-C: SIGINT twice) returns its leases, and the restarted process serves the account', async () => {
    const first = await startServer();
    await chat(first.url);
    expect(await held()).toBeGreaterThan(10_000); // a lease is open
    const done = exited(first.proc);
    first.proc.child.kill('SIGINT'); // from the terminal...
    await sleep(200); // (two signals sent at once are delivered as one)
    first.proc.child.kill('SIGINT'); // ...and forwarded by npm, a moment later
    expect(await done).toBe(0);
    expect(await held()).toBe(0);
    const second = await startServer();
    await chat(second.url);
    await second.proc.kill('SIGTERM');
    expect(await held()).toBe(0);
  }, 120_000);

  test('killed, has its leases recovered by another process within the liveness window', async () => {
    const victim = await startChild();
    const before = await usageCount();
    await chat(victim.url);
    await eventually(async () => (await usageCount()) > before); // its charge is written: the ledger stays exact
    expect(await held()).toBeGreaterThan(10_000);
    await victim.proc.kill('SIGKILL');
    const next = await startChild();
    // Recovered after three silent liveness periods (600 ms here), not at the hold's expiry an hour later.
    await eventually(async () => (await held()) === 0);
    await chat(next.url);
    await next.proc.kill('SIGTERM');
    const b = (await getBalance(db, accountId))!;
    const charged = await db.query(
      `SELECT COALESCE(sum(cost_vnd), 0)::int AS v FROM usage_records WHERE account_id = $1`,
      [accountId],
    );
    expect(b).toEqual({ balance: BALANCE - charged.rows[0].v, held: 0, available: BALANCE - charged.rows[0].v });
    expect(await verifyProjections(db)).toEqual([]);
  }, 120_000);
});
