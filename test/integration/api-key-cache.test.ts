import { createPool, type Db } from '../../src/db/pool';
import { createAccount } from '../../src/billing/ledger';
import { createApiKey, KeyResolver, revokeApiKey } from '../../src/auth/apiKeys';

let db: Db;
let queries = 0;
beforeAll(() => {
  db = createPool(process.env.DATABASE_URL!, 10);
  // Counts the statements the resolver sends to the real database.
  const query = db.query.bind(db) as (...a: unknown[]) => unknown;
  (db as unknown as { query: (...a: unknown[]) => unknown }).query = (...a: unknown[]) => {
    if (String(a[0]).includes('FROM api_keys')) queries++;
    return query(...a);
  };
});
afterAll(() => db.end());

test('requests arriving while a key is looked up share one query; revocation still lands after the TTL', async () => {
  const accountId = await createAccount(db, 'key-cache-test');
  const { key, id } = await createApiKey(db, accountId, 'k');
  const resolver = new KeyResolver(db, 300);
  queries = 0;
  const first = await Promise.all(Array.from({ length: 50 }, () => resolver.resolve(key)));
  expect(first.every((p) => p?.accountId === accountId && p.keyId === id)).toBe(true);
  expect(queries).toBe(1);
  await resolver.resolve(key); // cached
  expect(queries).toBe(1);

  expect(await revokeApiKey(db, accountId, id)).toBe(true);
  await new Promise((r) => setTimeout(r, 350));
  const after = await Promise.all(Array.from({ length: 20 }, () => resolver.resolve(key)));
  expect(after.every((p) => p === null)).toBe(true);
  expect(queries).toBe(2);
});

test("a principal older than the TTL is stale; a refresh rereads the key's settings or finds it revoked", async () => {
  const { setKeyLimits } = await import('../../src/limits/keyLimits');
  const accountId = await createAccount(db, 'key-cache-test');
  const { key, id } = await createApiKey(db, accountId, 'k');
  const resolver = new KeyResolver(db, 100);
  const p = (await resolver.resolve(key))!;
  expect(resolver.isStale(p)).toBe(false);
  expect(p.budgetFenceAt).toBeNull();
  await setKeyLimits(db, accountId, id, { budgetDayVnd: 1_000 }, 100);
  await new Promise((r) => setTimeout(r, 120));
  expect(resolver.isStale(p)).toBe(true);
  const fresh = (await resolver.refresh(p))!;
  expect(resolver.isStale(fresh)).toBe(false);
  expect(fresh.limits.budgetDayVnd).toBe(1_000);
  expect(fresh.budgetFenceAt).toBeGreaterThan(Date.now() - 1000);
  await revokeApiKey(db, accountId, id);
  expect(await resolver.refresh(fresh)).toBeNull();
});

test('distinct unknown keys without end are cached up to a bound, never pushing out a key that exists', async () => {
  const accountId = await createAccount(db, 'key-cache-test');
  const { key } = await createApiKey(db, accountId, 'k');
  const resolver = new KeyResolver(db, 60_000);
  expect((await resolver.resolve(key))?.accountId).toBe(accountId);
  for (let i = 0; i < 3_000; i += 100) {
    const batch = Array.from({ length: 100 }, (_, j) => resolver.resolve(`sk-gw-unknown-${i + j}-${'x'.repeat(40)}`));
    expect((await Promise.all(batch)).every((p) => p === null)).toBe(true);
  }
  expect(resolver.cachedKeys()).toEqual({ known: 1, unknown: 1_000 });
  queries = 0;
  expect((await resolver.resolve(key))?.accountId).toBe(accountId);
  expect(await resolver.resolve('sk-gw-unknown-2999-' + 'x'.repeat(40))).toBeNull(); // the newest unknown: cached
  expect(queries).toBe(0);
});
