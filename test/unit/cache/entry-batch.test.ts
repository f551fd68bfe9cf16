import { EntryBatch } from '../../../src/cache/batch';
import { decodeEntry, encodeEntry, makeEntry } from '../../../src/cache/entry';

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

test("a new answer's stored form is made when the batch is packed, and read back as the entry it was", () => {
  const b = new EntryBatch();
  const body = Buffer.from('data: {"a":1}\n\ndata: [DONE]\n\n');
  const answer = { key: 'k1', kind: 'sse' as const, body, model: 'gpt-4o', costVnd: 42, createdAt: 1_700_000_000_000 };
  b.add('k1', owner(), answer, 60, 9_000, 1);
  b.add(
    'k2',
    owner(),
    { ...answer, key: 'k2', kind: 'raw', type: 'application/json', body: Buffer.from('{}') },
    60,
    9_000,
    2,
  );
  body.fill(0); // copied: the request's buffer is its own again
  const want = makeEntry({ ...answer, body: 'data: {"a":1}\n\ndata: [DONE]\n\n' });
  expect(decodeEntry(b.get('k1')!, 'k1')).toEqual(want);
  const { bytes, json } = b.packed();
  const rows = JSON.parse(json) as { k: string; o: number; n: number }[];
  const stored = (r: { o: number; n: number }) => bytes.subarray(r.o - 1, r.o - 1 + r.n);
  expect(rows.map((r) => r.k)).toEqual(['k1', 'k2']);
  expect(decodeEntry(stored(rows[0]), 'k1')).toEqual(want);
  expect(decodeEntry(stored(rows[1]), 'k2')).toMatchObject({ kind: 'raw', type: 'application/json', costVnd: 42 });
  expect(stored(rows[0]).equals(encodeEntry(want))).toBe(true);
  // Read under another key (poisoned, mixed up): refused.
  expect(decodeEntry(stored(rows[0]), 'k2')).toBeNull();
});
