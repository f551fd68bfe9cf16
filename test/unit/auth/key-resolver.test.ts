import { createHash } from 'node:crypto';
import { hashKey, KEY_PREFIX, KeyResolver } from '../../../src/auth/apiKeys';
import { NO_LIMITS } from '../../../src/limits/keyLimits';
import type { Db } from '../../../src/db/pool';

/**
 * API keys resolved through a short-lived cache, on a fake clock, over an in-memory table of keys: what is looked
 * up, when again, how many queries a burst costs, and that clients sending junk keys cannot grow the process.
 */

const T0 = Date.UTC(2026, 0, 1);
const KEY = `${KEY_PREFIX}${'a'.repeat(32)}`;

interface Row {
  id: string;
  account_id: string;
  expires_at: Date | null;
  budget_fence_at: Date | null;
  rpm: number | null;
  tpm: number | null;
  budget_day: number | null;
  budget_month: number | null;
  project_id: string;
  spend_limited: boolean;
}

/** The api_keys table as the resolver's queries see it: rows by key hash; every query logged. */
class KeysTable {
  byHash = new Map<string, Row>();
  lookups = 0;
  touches: string[] = [];
  refreshes = 0;
  /** Held until released: a slow database. */
  gate: Promise<void> | null = null;
  readonly db = {
    query: async (sql: string, params: unknown[]) => {
      if (sql.startsWith('UPDATE api_keys SET last_used_at')) {
        this.touches.push(params[0] as string);
        return { rows: [], rowCount: 1 };
      }
      if (this.gate) await this.gate;
      if (sql.includes('k.key_hash = $1')) {
        this.lookups++;
        const row = this.byHash.get((params[0] as Buffer).toString('hex'));
        return { rows: row ? [row] : [], rowCount: row ? 1 : 0 };
      }
      this.refreshes++;
      const row = [...this.byHash.values()].find((r) => r.id === params[0]);
      return { rows: row ? [row] : [], rowCount: row ? 1 : 0 };
    },
  } as unknown as Db;

  add(key: string, row: Partial<Row> = {}): Row {
    const r: Row = {
      id: 'key_1',
      account_id: 'acct_1',
      expires_at: null,
      budget_fence_at: null,
      rpm: null,
      tpm: null,
      budget_day: null,
      budget_month: null,
      project_id: 'proj_1',
      spend_limited: false,
      ...row,
    };
    this.byHash.set(hashKey(key).toString('hex'), r);
    return r;
  }
}

let table: KeysTable;
beforeEach(() => {
  jest.useFakeTimers({ now: T0 });
  table = new KeysTable();
});
afterEach(() => jest.useRealTimers());

test('only the SHA-256 of a key is looked up', () => {
  expect(hashKey(KEY)).toEqual(createHash('sha256').update(KEY).digest());
});

test('a key resolves to its account, its effective limits and dates', async () => {
  table.add(KEY, { rpm: 5, budget_month: 0, expires_at: new Date(T0 + 1000), budget_fence_at: new Date(T0 - 1) });
  const keys = new KeyResolver(table.db);
  expect(await keys.resolve(KEY)).toEqual({
    accountId: 'acct_1',
    keyId: 'key_1',
    limits: { rpm: 5, tpm: null, budgetDayVnd: null, budgetMonthVnd: 0 },
    expiresAt: T0 + 1000,
    budgetFenceAt: T0 - 1,
    fetchedAt: T0,
    projectId: 'proj_1',
    spendLimited: false,
  });
  table.add(`${KEY}b`, { id: 'key_2' });
  expect((await keys.resolve(`${KEY}b`))!.limits).toBe(NO_LIMITS);
});

test('not even looked up: a key without the prefix, or absurdly long', async () => {
  const keys = new KeyResolver(table.db);
  expect(await keys.resolve('sk-other-key')).toBeNull();
  expect(await keys.resolve(KEY_PREFIX + 'x'.repeat(200))).toBeNull();
  expect(table.lookups).toBe(0);
});

test('found or not, a key is cached for the TTL; then looked up again (a revocation takes effect)', async () => {
  table.add(KEY);
  const keys = new KeyResolver(table.db, 2000);
  for (let i = 0; i < 10; i++) expect(await keys.resolve(KEY)).not.toBeNull();
  const unknown = `${KEY_PREFIX}nope`;
  for (let i = 0; i < 10; i++) expect(await keys.resolve(unknown)).toBeNull();
  expect(table.lookups).toBe(2);
  table.byHash.clear(); // revoked
  jest.setSystemTime(T0 + 1999);
  expect(await keys.resolve(KEY)).not.toBeNull(); // still cached
  jest.setSystemTime(T0 + 2000);
  expect(await keys.resolve(KEY)).toBeNull();
  expect(table.lookups).toBe(3);
  expect(keys.cachedKeys()).toEqual({ known: 0, unknown: 2 }); // moved to the unknown keys
});

test('a burst while an entry is missing shares one query', async () => {
  table.add(KEY);
  const keys = new KeyResolver(table.db);
  let release!: () => void;
  table.gate = new Promise((r) => (release = r));
  const all = Promise.all(Array.from({ length: 50 }, () => keys.resolve(KEY)));
  release();
  table.gate = null;
  const got = await all;
  expect(new Set(got).size).toBe(1);
  expect(table.lookups).toBe(1);
});

test('distinct junk keys cannot grow the cache past its bound, nor push out a key that exists', async () => {
  table.add(KEY);
  const keys = new KeyResolver(table.db);
  await keys.resolve(KEY);
  for (let i = 0; i < 3000; i++) await keys.resolve(`${KEY_PREFIX}junk-${i}`);
  expect(keys.cachedKeys()).toEqual({ known: 1, unknown: 1000 });
  const before = table.lookups;
  expect(await keys.resolve(KEY)).not.toBeNull();
  expect(table.lookups).toBe(before); // still cached
});

test('last use is written at most once a minute per key, in the background', async () => {
  table.add(KEY);
  const keys = new KeyResolver(table.db, 2000);
  for (let t = 0; t < 120_000; t += 500) {
    jest.setSystemTime(T0 + t);
    await keys.resolve(KEY);
  }
  expect(table.touches).toEqual(['key_1', 'key_1']); // at 0 and at 60 s
});

test('a principal is stale after the TTL; a refresh reads it again, null once revoked', async () => {
  table.add(KEY, { rpm: 1 });
  const keys = new KeyResolver(table.db, 2000);
  const p = (await keys.resolve(KEY))!;
  expect(keys.isStale(p)).toBe(false);
  jest.setSystemTime(T0 + 2000);
  expect(keys.isStale(p)).toBe(true);
  table.add(KEY, { rpm: 7 });
  expect(await keys.refresh(p)).toMatchObject({ keyId: 'key_1', limits: { rpm: 7 }, fetchedAt: T0 + 2000 });
  table.byHash.clear();
  expect(await keys.refresh(p)).toBeNull();
  expect(table.refreshes).toBe(2);
});
