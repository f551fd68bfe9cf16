import { HitMemory } from '../../../src/cache/hitMemory';

test('entries recently hit: kept until their expiry or their `until`, the least recently used out first', () => {
  const m = new HitMemory(800); // entries over 100 bytes (an eighth) are not kept
  const now = 1_000;
  m.set('a', Buffer.alloc(90, 1), now + 10_000);
  m.set('b', Buffer.alloc(90, 2), now + 10_000, now + 500);
  expect(m.get('a', now)?.[0]).toBe(1);
  expect(m.get('b', now + 499)?.[0]).toBe(2);
  expect(m.get('b', now + 500)).toBeUndefined(); // past its until: forgotten
  expect(m.get('a', now + 10_000)).toBeUndefined(); // expired
  m.set('big', Buffer.alloc(101), now + 10_000);
  expect(m.get('big', now)).toBeUndefined();
  // 9 of 90 bytes fill 800: the one used least recently goes.
  for (let i = 0; i < 8; i++) m.set(`k${i}`, Buffer.alloc(90, i), now + 10_000);
  expect(m.get('k0', now)).toBeDefined(); // used: now the most recent
  m.set('k8', Buffer.alloc(90), now + 10_000);
  expect(m.get('k1', now)).toBeUndefined();
  expect(m.get('k0', now)).toBeDefined();
  m.delete('k0');
  expect(m.get('k0', now)).toBeUndefined();
});

test('an entry read as a slice of a larger buffer is kept as a copy of its own', () => {
  const m = new HitMemory();
  const slab = Buffer.alloc(8192, 7);
  m.set('s', slab.subarray(0, 10), Date.now() + 1000);
  const kept = m.get('s', Date.now())!;
  expect(kept.buffer.byteLength).toBe(10);
  expect(kept.equals(Buffer.alloc(10, 7))).toBe(true);
});
