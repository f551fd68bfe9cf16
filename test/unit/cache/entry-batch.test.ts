import { EntryBatch } from '../../../src/cache/batch';

const owner = (projectId: string | null = null) => ({ accountId: 'acct', model: 'gpt-4o-mini', projectId });

test('a batch keeps copies of its entries, each key once, and packs the live ones in order', () => {
  const b = new EntryBatch();
  const one = Buffer.from('first entry');
  b.add('k1', owner(), one, 60, 1_000, 1);
  one.fill(0); // the caller's buffer is its own again: the batch copied it
  b.add('k2', owner('proj'), Buffer.from('second'), 60, 2_000, 2);
  b.add('k1', owner(), Buffer.from('first, again'), 60, 3_000, 3); // put again: the earlier one is not written
  b.add('k3', owner(), Buffer.from('third'), 60, 4_000, 4);
  b.delete('k3'); // forgotten: not written
  expect(b.get('k1')!.toString()).toBe('first, again');
  expect(b.get('k3')).toBeNull();
  expect(b.has('k2')).toBe(true);
  const live = [...b.live()];
  expect(live.map((i) => b.keys[i])).toEqual(['k2', 'k1']);
  const { bytes, json, newest } = b.packed();
  expect(bytes.toString()).toBe('secondfirst, again');
  const rows = JSON.parse(json);
  expect(rows.map((r: { k: string; o: number; n: number }) => [r.k, r.o, r.n])).toEqual([
    ['k2', 1, 6],
    ['k1', 7, 12],
  ]);
  expect(rows[0]).toMatchObject({ t: 60, e: 2_000, c: 2, a: 'acct', m: 'gpt-4o-mini', p: 'proj' });
  expect(rows[1].p).toBeNull();
  expect(newest).toBe(3);
  expect(b.projects[live[0]]).toBe('proj');
  // A copy: the batch's buffer is reused once cleared.
  const got = b.get('k2')!;
  b.clear();
  b.add('k9', owner(), Buffer.from('XXXXXX'), 60, 5_000, 5);
  expect(got.toString()).toBe('second');
  expect(b.size).toBe(1);
});

test('a batch grows for large entries', () => {
  const b = new EntryBatch();
  const big = Buffer.alloc(200 * 1024, 7);
  for (let i = 0; i < 3; i++) b.add(`k${i}`, owner(), big, 60, 1, 1);
  expect(b.get('k2')!.equals(big)).toBe(true);
  expect(b.packed().bytes.length).toBe(3 * big.length);
});
