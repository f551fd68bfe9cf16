import { createHash } from 'node:crypto';
import { KeyIndex } from '../../../src/cache/keyIndex';

const key = (s: string) => createHash('sha256').update(s).digest('hex');

test('the index holds keys with their expiry, to the second above, as small integers', () => {
  const ix = new KeyIndex();
  const now = Date.now();
  ix.set(key('a'), now + 60_500);
  const exp = ix.get(key('a'))!;
  expect(exp).toBeGreaterThanOrEqual(now + 60_500);
  expect(exp - (now + 60_500)).toBeLessThan(1000);
  expect(ix.get(key('b'))).toBeUndefined();
  expect(ix.has(key('a'))).toBe(true);
  expect(Number.isInteger(KeyIndex.id(key('a')))).toBe(true);
  expect(KeyIndex.id(key('a'))).toBeLessThan(2 ** 30);
  expect(KeyIndex.id('not hex at all')).toBeLessThan(2 ** 30);
  ix.delete(key('a'));
  expect(ix.has(key('a'))).toBe(false);
});

test('pruning forgets the expired keys and keeps the live ones', () => {
  const ix = new KeyIndex();
  const now = Date.now();
  for (let i = 0; i < 10; i++) ix.set(key(`old${i}`), now - 5_000);
  for (let i = 0; i < 10; i++) ix.set(key(`new${i}`), now + 60_000);
  ix.prune(100);
  expect(ix.size).toBe(10);
  expect(ix.has(key('new3'))).toBe(true);
  expect(ix.has(key('old3'))).toBe(false);
});
