import { canonicalJson, entryHash } from '../../../src/organizations/audit';
import { bucketRange, bucketsOf, pageToken } from '../../../src/organizations/buckets';
import { cursorOf, limitOf, listOf } from '../../../src/organizations/ids';

/**
 * The organization room's pure parts: the audit chain's hash (same content, same hash; any change or reordering
 * breaks every later link) and the Admin API's query checks (usage buckets and their pages, limits and cursors).
 */

const entry = (id: string, details: unknown = { name: 'p' }) => ({
  id,
  account_id: 'acct',
  type: 'project.created',
  effective_at: new Date('2026-11-29T00:00:00Z'),
  project: null,
  actor: { type: 'api_key', api_key: { id: 'key_1' } },
  resource_id: 'proj_1',
  details,
});

test('canonical JSON: key order and undefined fields do not change the text', () => {
  expect(canonicalJson({ b: 1, a: [{ y: 2, x: undefined, w: null }] })).toBe('{"a":[{"w":null,"y":2}],"b":1}');
  expect(canonicalJson({ a: 1, b: 2 })).toBe(canonicalJson({ b: 2, a: 1 }));
  expect(canonicalJson(undefined)).toBe('null');
});

test('the chain: each hash covers its entry and the one before; a changed or removed entry breaks the rest', () => {
  const chain = (es: ReturnType<typeof entry>[]) => {
    const out: Buffer[] = [];
    for (const e of es) out.push(entryHash(out.at(-1) ?? null, e));
    return out.map((h) => h.toString('hex'));
  };
  const good = chain([entry('a'), entry('b'), entry('c')]);
  expect(new Set(good).size).toBe(3);
  expect(chain([entry('a'), entry('b'), entry('c')])).toEqual(good); // deterministic
  const edited = chain([entry('a'), entry('b', { name: 'q' }), entry('c')]);
  expect(edited[0]).toBe(good[0]);
  expect(edited[1]).not.toBe(good[1]);
  expect(edited[2]).not.toBe(good[2]);
  const removed = chain([entry('a'), entry('c')]);
  expect(removed[1]).not.toBe(good[2]);
  expect(entryHash(null, entry('a', { b: 1, a: 2 }))).toEqual(entryHash(null, entry('a', { a: 2, b: 1 })));
});

test('usage buckets: pages of whole buckets, next_page a token of this query only', () => {
  const day = 86_400;
  const q = { start_time: String(10 * day), end_time: String(20 * day), bucket_width: '1d', limit: '4' };
  const first = bucketRange(q);
  expect(first).toEqual({ from: 10 * day, to: 14 * day, width: day, end: 20 * day, next: 14 * day });
  const page = bucketsOf(first, new Map([[11 * day, ['x']]]));
  expect(page.data.map((b) => b.results.length)).toEqual([0, 1, 0, 0]);
  expect(page).toMatchObject({ has_more: true, next_page: pageToken(14 * day) });
  const last = bucketRange({ ...q, page: pageToken(18 * day) });
  expect(last).toMatchObject({ from: 18 * day, to: 20 * day, next: null });
  expect(bucketsOf(last, new Map()).has_more).toBe(false);
});

test('usage buckets: bad input is a 400 naming the parameter', () => {
  const base = { start_time: '86400', end_time: '864000' };
  const param = (q: Record<string, string | string[]>) => {
    try {
      bucketRange(q);
    } catch (e) {
      return (e as { param?: string }).param ?? (e as Error).message;
    }
    return 'accepted';
  };
  expect(param({})).toBe('start_time');
  expect(param({ start_time: '-5' })).toBe('start_time');
  expect(param({ start_time: '1e9' })).toBe('start_time');
  expect(param({ ...base, end_time: '86400' })).toBe('end_time');
  expect(param({ ...base, bucket_width: '1w' })).toBe('bucket_width');
  expect(param({ ...base, bucket_width: '1d', limit: '32' })).toBe('limit');
  expect(param({ ...base, limit: '0' })).toBe('limit');
  expect(param({ ...base, page: pageToken(86400 + 17) })).toBe('page'); // not on a bucket's edge
  expect(param({ ...base, page: 'not a token!' })).toBe('page');
  expect(param({ ...base, start_time: ['1', '2'] })).toBe('start_time');
  expect(param(base)).toBe('accepted');
});

test('lists: limit 1-100, cursors of the list ids, has_more from the extra row', () => {
  expect(limitOf({})).toBe(20);
  expect(limitOf({ limit: '100' })).toBe(100);
  for (const bad of ['0', '101', '1.5', '1e2', '-1', '']) expect(() => limitOf({ limit: bad })).toThrow(/limit/);
  expect(cursorOf({ after: 'proj_abc' })).toBe('proj_abc');
  expect(cursorOf({})).toBeNull();
  expect(() => cursorOf({ after: "x' OR 1=1" })).toThrow(/after/);
  expect(() => cursorOf({ before: 'a'.repeat(81) }, 'before')).toThrow(/before/);
  const rows = [{ id: 'a' }, { id: 'b' }, { id: 'c' }];
  expect(listOf(rows, 2, (r) => r)).toEqual({
    object: 'list',
    data: [{ id: 'a' }, { id: 'b' }],
    first_id: 'a',
    last_id: 'b',
    has_more: true,
  });
  expect(listOf(rows, 3, (r) => r).has_more).toBe(false);
});
