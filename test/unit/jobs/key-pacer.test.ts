import { KeyPacer } from '../../../src/jobs/keyPacer';
import type { Queryable } from '../../../src/db/pool';

/**
 * A key's batch requests paced to a share of its RPM and TPM, on a fake clock: the one-second burst, the refill
 * rate, token debt, limits re-read every 10 s. The database is an in-memory table of effective limits.
 */

const T0 = Date.UTC(2026, 0, 1);
type Limits = { rpm: number | null; tpm: number | null };

/** The key limits query's stand-in: rows by key id, and how many times it was asked. */
class LimitsTable {
  rows = new Map<string, Limits>();
  reads = 0;
  readonly db = {
    query: async (_sql: string, params: unknown[]) => {
      this.reads++;
      const row = this.rows.get(params[0] as string);
      return { rows: row ? [row] : [], rowCount: row ? 1 : 0 };
    },
  } as unknown as Queryable;
}

let table: LimitsTable;
beforeEach(() => {
  jest.useFakeTimers({ now: T0 });
  table = new LimitsTable();
});
afterEach(() => jest.useRealTimers());

/** Acquires `n` times in a row; the ms of fake time each took. */
async function acquireTimes(pacer: KeyPacer, key: string | null, n: number): Promise<number[]> {
  const took: number[] = [];
  for (let i = 0; i < n; i++) {
    const start = Date.now();
    const p = pacer.acquire(key);
    let done = false;
    void p.then(() => (done = true));
    await jest.advanceTimersByTimeAsync(0);
    while (!done) await jest.advanceTimersByTimeAsync(10);
    await p;
    took.push(Date.now() - start);
  }
  return took;
}

test('requests: one second of the share as a burst, then one per (60 s / share of the RPM)', async () => {
  table.rows.set('k', { rpm: 600, tpm: null }); // half of 600/min: 5 per second
  const pacer = new KeyPacer(table.db, 0.5, () => Date.now());
  const took = await acquireTimes(pacer, 'k', 8);
  expect(took.slice(0, 5)).toEqual([0, 0, 0, 0, 0]); // the burst
  for (const t of took.slice(5)) expect(t).toBeGreaterThanOrEqual(200);
  for (const t of took.slice(5)) expect(t).toBeLessThanOrEqual(210); // the clock advances in 10 ms steps
});

test('a key with a low RPM still gets one request at once, and then waits its turn', async () => {
  table.rows.set('slow', { rpm: 2, tpm: null }); // share 1: one per 30 s
  const pacer = new KeyPacer(table.db, 1, () => Date.now());
  const took = await acquireTimes(pacer, 'slow', 3);
  expect(took[0]).toBe(0);
  expect(took[1]).toBeGreaterThanOrEqual(30_000);
  expect(took[1]).toBeLessThan(30_100);
  expect(took[2]).toBeGreaterThanOrEqual(30_000);
});

test('tokens are counted after each request: a request waits out the debt of the ones before', async () => {
  table.rows.set('k', { rpm: null, tpm: 60_000 }); // share 1: 1,000 tokens a second, a burst of 1,000
  const pacer = new KeyPacer(table.db, 1, () => Date.now());
  expect(await acquireTimes(pacer, 'k', 1)).toEqual([0]);
  pacer.spent('k', 3000); // 2,000 in debt: two seconds until the level is back at zero
  const [wait] = await acquireTimes(pacer, 'k', 1);
  expect(wait).toBeGreaterThanOrEqual(2000);
  expect(wait).toBeLessThan(2100);
  pacer.spent('k', 0); // nothing spent, nothing counted
  pacer.spent('k', -50);
  expect(await acquireTimes(pacer, 'k', 1)).toEqual([0]);
});

test('a key without limits, or no key at all, is never paced and never looked up twice in 10 s', async () => {
  table.rows.set('free', { rpm: null, tpm: null });
  const pacer = new KeyPacer(table.db, 0.5, () => Date.now());
  expect(await acquireTimes(pacer, 'free', 50)).toEqual(new Array(50).fill(0));
  expect(table.reads).toBe(1);
  expect(await acquireTimes(pacer, null, 3)).toEqual([0, 0, 0]);
  expect(await acquireTimes(pacer, 'unknown', 3)).toEqual([0, 0, 0]); // no row: no limits
  pacer.spent('free', 1000); // no bucket: ignored
  expect(table.reads).toBe(2);
});

test('concurrent requests of a key share one read of its limits and one bucket', async () => {
  table.rows.set('k', { rpm: 120, tpm: null }); // share 1: a burst of 2
  const pacer = new KeyPacer(table.db, 1, () => Date.now());
  let admitted = 0;
  const all = Array.from({ length: 4 }, () => pacer.acquire('k').then(() => admitted++));
  await jest.advanceTimersByTimeAsync(0);
  expect(table.reads).toBe(1);
  expect(admitted).toBe(2);
  await jest.advanceTimersByTimeAsync(1000); // one more every 500 ms
  expect(admitted).toBe(4);
  await Promise.all(all);
});

test('limits are re-read after 10 s: a changed limit takes effect, an unchanged one keeps its level', async () => {
  table.rows.set('k', { rpm: 60, tpm: 60_000 }); // share 1: a burst of 1 request and 1,000 tokens, per second
  const pacer = new KeyPacer(table.db, 1, () => Date.now());
  expect(await acquireTimes(pacer, 'k', 1)).toEqual([0]);
  pacer.spent('k', 30_000); // 29,000 tokens in debt
  jest.setSystemTime(T0 + 10_000); // 10,000 refilled: 19,000 still owed across the re-read
  const [wait] = await acquireTimes(pacer, 'k', 1);
  expect(table.reads).toBe(3); // at 10 s and, during the wait, at 20 s
  expect(wait).toBeGreaterThanOrEqual(19_000);
  expect(wait).toBeLessThan(19_100);
  table.rows.set('k', { rpm: 600, tpm: null }); // raised, and no TPM now: a burst of 10
  jest.setSystemTime(Date.now() + 10_000);
  expect(await acquireTimes(pacer, 'k', 10)).toEqual(new Array(10).fill(0));
  expect(table.reads).toBe(4);
});

test('an aborted wait ends with an error instead of taking a request', async () => {
  table.rows.set('k', { rpm: 1, tpm: null });
  const pacer = new KeyPacer(table.db, 1, () => Date.now());
  await pacer.acquire('k');
  const ac = new AbortController();
  const p = pacer.acquire('k', ac.signal);
  const failed = expect(p).rejects.toThrow('aborted');
  ac.abort();
  await jest.advanceTimersByTimeAsync(1000);
  await failed;
});
