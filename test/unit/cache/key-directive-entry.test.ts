import { parseDirective } from '../../../src/cache/directive';
import { decodeEntry, encodeEntry, makeEntry } from '../../../src/cache/entry';
import { requestKey } from '../../../src/cache/requestKey';

/**
 * The response cache's pure parts: the request key (what it ignores, what it never shares), the header's directives
 * (bad values a 400 naming the header) and a stored entry's checks (corrupt, torn or poisoned entries refused).
 */

const parts = (body: Record<string, unknown>, over: Partial<Parameters<typeof requestKey>[0]> = {}) => ({
  scope: 'a:acct_1',
  operation: 'chat.completions',
  model: 'gpt-4o-mini',
  body,
  ...over,
});
const ask = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], temperature: 0 };

test('the key: key order, the user field, transport hints and the model alias do not matter', () => {
  const k = requestKey(parts(ask));
  expect(requestKey(parts({ temperature: 0, messages: [{ content: 'hi', role: 'user' }] }))).toBe(k);
  expect(requestKey(parts({ ...ask, user: 'u-42', prompt_cache_key: 'conv-1', safety_identifier: 's' }))).toBe(k);
  expect(requestKey(parts({ ...ask, model: 'an-alias' }))).toBe(k);
  expect(requestKey(parts({ ...ask, stream: false }))).toBe(k);
});

test('the key: the scope, the model, the operation, the content and the stream shape all matter', () => {
  const k = requestKey(parts(ask));
  const others = [
    requestKey(parts(ask, { scope: 'a:acct_2' })), // another organization never reads this entry
    requestKey(parts(ask, { scope: 'k:acct_1:key_1' })),
    requestKey(parts(ask, { model: 'gpt-4o' })),
    requestKey(parts(ask, { operation: 'completions' })),
    requestKey(parts({ ...ask, temperature: 1 })),
    requestKey(parts({ ...ask, stream: true })),
    requestKey(parts({ ...ask, stream: true, stream_options: { include_usage: true } })),
    requestKey(parts(ask, { extra: { 'anthropic-version': '2023-06-01' } })),
  ];
  expect(new Set([k, ...others]).size).toBe(others.length + 1);
  // Anthropic's end-user id is its `user`: ignored; the rest of its metadata is not.
  const m = { messages: [{ role: 'user', content: 'hi' }], max_tokens: 10 };
  const mk = (metadata?: object) => requestKey(parts({ ...m, metadata }, { operation: 'messages' }));
  expect(mk({ user_id: 'u1' })).toBe(mk());
  expect(mk({ user_id: 'u1', other: 1 })).not.toBe(mk());
});

test('the header: ttl, no-store, refresh; anything else a 400 naming x-gateway-cache', () => {
  expect(parseDirective(undefined, 3600)).toMatchObject({ asked: false, noStore: false, refresh: false });
  expect(parseDirective('ttl=60', 3600)).toEqual({ asked: true, noStore: false, refresh: false, ttlSeconds: 60 });
  expect(parseDirective(' Refresh , ttl=5', 3600)).toEqual({
    asked: true,
    noStore: false,
    refresh: true,
    ttlSeconds: 5,
  });
  expect(parseDirective('no-store', 3600)).toMatchObject({ noStore: true, asked: false });
  for (const bad of [
    'ttl=0',
    'ttl=3601',
    'ttl=-1',
    'ttl=1.5',
    'ttl=1e3',
    'ttl=',
    'ttl=5,ttl=6',
    'forever',
    'no-store,refresh',
  ])
    expect(() => parseDirective(bad, 3600)).toThrow(expect.objectContaining({ status: 400, param: 'x-gateway-cache' }));
});

test('entries: read back as written; another key, a torn body or a bad cost is refused', () => {
  const e = makeEntry({ key: 'k1', kind: 'json', body: '{"id":"x"}', model: 'gpt-4o-mini', costVnd: 12, createdAt: 1 });
  const buf = encodeEntry(e);
  expect(decodeEntry(buf, 'k1')).toEqual(e);
  expect(decodeEntry(buf, 'k2')).toBeNull(); // poisoned: written under another key
  expect(decodeEntry(buf.subarray(0, buf.length - 3), 'k1')).toBeNull(); // truncated
  const tampered = Buffer.from(buf.toString('utf8').replace('"x"', '"y"'));
  expect(tampered.equals(buf)).toBe(false);
  expect(decodeEntry(tampered, 'k1')).toBeNull(); // body no longer matches its digest
  for (const costVnd of [-1, 1.5, Number.MAX_SAFE_INTEGER + 2])
    expect(decodeEntry(encodeEntry({ ...e, costVnd }), 'k1')).toBeNull();
  expect(decodeEntry(Buffer.from('not json'), 'k1')).toBeNull();
  expect(decodeEntry(Buffer.from('{"v":1}\nnot a header'), 'k1')).toBeNull();
  // An entry of the older form (the whole entry one JSON object, its body a JSON string) still reads back.
  expect(decodeEntry(Buffer.from(JSON.stringify({ ...e, body: e.body.toString() })), 'k1')).toEqual(e);
  // A body with newlines of its own: only the first one ends the header.
  const sse = makeEntry({ ...e, kind: 'sse', body: 'data: {"a":1}\n\ndata: [DONE]\n\n' });
  expect(decodeEntry(encodeEntry(sse), 'k1')).toEqual(sse);
});

test('an entry keeps its body as bytes: a binary answer reads back as it was', () => {
  const body = Buffer.from([0xff, 0xfe, 0x00, 0x80, 0x0a, 0xc3]); // not UTF-8, a newline inside
  const e = makeEntry({
    key: 'k1',
    kind: 'raw',
    type: 'application/octet-stream',
    body,
    model: 'm',
    costVnd: 1,
    createdAt: 1,
  });
  const back = decodeEntry(encodeEntry(e), 'k1')!;
  expect(back.body.equals(body)).toBe(true);
  expect(back.type).toBe('application/octet-stream');
});
