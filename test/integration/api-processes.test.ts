import fs from 'node:fs';
import { randomUUID } from 'node:crypto';
import OpenAI from 'openai';
import { createPool, type Db } from '../../src/db/pool';
import { getBalance, verifyProjections } from '../../src/billing/ledger';
import { createApiKey } from '../../src/auth/apiKeys';
import { startEmulator, type Emulator } from '../../emulator/server';
import { spawnTsChild, type TsChild } from '../support/tsChild';
import { eventually } from '../support/video';
import { fundedAccount } from '../support/records';

/**
 * `API_PROCESSES=2` (src/runtime/apiProcesses.ts): two API processes behind one port under a primary, on one
 * database and the machine's Redis (a key prefix of this test's own). Requests spread over both are each billed
 * once; a process that dies is replaced; SIGTERM to the primary stops every process cleanly (their usage flushed).
 */

let db: Db;
let emulator: Emulator;
let group: TsChild | undefined;

const children = (pid: number): number[] => {
  try {
    const text = fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
    return text ? text.split(/\s+/).map(Number) : [];
  } catch {
    return [];
  }
};

beforeAll(async () => {
  db = createPool(process.env.DATABASE_URL!, 4);
  emulator = await startEmulator();
}, 60_000);

afterAll(async () => {
  await group?.kill('SIGKILL');
  await emulator?.close();
  await db?.end();
});

test('two processes share the port, each request billed once, a dead one replaced, SIGTERM stops all', async () => {
  group = await spawnTsChild('apiProcessesChild.ts', {
    API_PROCESSES: '2',
    PORT: '0',
    DATABASE_URL: process.env.DATABASE_URL,
    REDIS_URL: process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379',
    REDIS_KEY_PREFIX: `gw-test:${randomUUID()}:`,
    TEMPORAL_ADDRESS: 'off',
    EMULATOR_URL: emulator.url,
    LOG_LEVEL: 'silent',
    CREDIT_FLUSH_MS: '50',
  });
  const url = `http://127.0.0.1:${group.firstLine.trim()}`;
  const primary = group.pid;
  expect(children(primary)).toHaveLength(2);

  const start = 1_000_000;
  const accountId = await fundedAccount(db, start, 'api-processes');
  const { key } = await createApiKey(db, accountId, 'k');
  const ask = (n: number) =>
    Promise.all(
      Array.from({ length: n }, () =>
        new OpenAI({ apiKey: key, baseURL: `${url}/v1`, maxRetries: 0 }).chat.completions.create({
          model: 'gpt-4o-mini',
          max_tokens: 16,
          messages: [{ role: 'user', content: 'hello' }],
        }),
      ),
    );
  expect((await ask(20)).every((r) => r.choices.length === 1)).toBe(true);
  const recorded = async () =>
    Number((await db.query('SELECT count(*) AS n FROM usage_records WHERE account_id = $1', [accountId])).rows[0].n);
  // Billed before the kill: a process killed outright takes only what it has not yet flushed.
  await eventually(async () => (await recorded()) === 20);

  // A worker killed outright is replaced, and the group keeps serving.
  const [victim, survivor] = children(primary);
  process.kill(victim, 'SIGKILL');
  await eventually(async () => {
    const now = children(primary);
    return now.length === 2 && !now.includes(victim) && now.includes(survivor);
  });
  await eventually(async () => (await fetch(`${url}/readyz`)).ok);
  expect((await ask(10)).length).toBe(10);

  // SIGTERM: every process stops cleanly and flushes what it billed.
  const exited = new Promise<number | null>((res) => group!.child.once('exit', (code) => res(code)));
  group.child.kill('SIGTERM');
  expect(await exited).toBe(0);
  group = undefined;

  const rows = (await db.query('SELECT cost_vnd FROM usage_records WHERE account_id = $1', [accountId])).rows;
  const charged = (
    await db.query(
      `SELECT COALESCE(SUM(amount), 0)::bigint AS s FROM ledger_events WHERE account_id = $1 AND kind = 'charged'`,
      [accountId],
    )
  ).rows[0].s;
  const billed = rows.reduce((s, r) => s + Number(r.cost_vnd), 0);
  expect(rows.length).toBe(30);
  expect(Number(charged)).toBe(billed);
  const bal = (await getBalance(db, accountId))!;
  expect(bal.balance).toBe(start - billed);
  expect(await verifyProjections(db)).toEqual([]);
}, 180_000);
