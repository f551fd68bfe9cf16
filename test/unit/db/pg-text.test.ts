import { findUnstorableText, isUnstorableText, jsonForPostgres } from '../../../src/db/pgText';

test('NUL and unpaired surrogates are unstorable; paired surrogates and other text are fine', () => {
  for (const s of ['a\u0000', '\ud800', 'x\udfff', '\udc00\ud800', 'ok\ud83d']) expect(isUnstorableText(s)).toBe(true);
  for (const s of ['', 'plain', '😀', 'ti\u1ebfng Vi\u1ec7t', '\\u0000', '\u0001\uffff'])
    expect(isUnstorableText(s)).toBe(false);
});

test('findUnstorableText names the first bad value or the object holding a bad key', () => {
  expect(findUnstorableText({ a: ['ok', { b: 'x\u0000' }] }, 'parameters')).toBe('parameters.a[1].b');
  expect(findUnstorableText({ ok: 1, nested: { ['k\ud800']: 1 } }, 'parameters')).toBe('parameters.nested');
  expect(findUnstorableText({ a: 1, b: [true, null, '😀'] }, 'parameters')).toBeNull();
});

test('jsonForPostgres replaces just the unstorable characters, in values and keys; escaped backslashes stay', () => {
  const v = { ['k\ud800']: 'a\u0000b', lit: '\\u0000 and \\\\ud800', emoji: '😀', mixed: '\\\u0000' };
  const out = JSON.parse(jsonForPostgres(v));
  expect(out).toEqual({ 'k\ufffd': 'a\ufffdb', lit: '\\u0000 and \\\\ud800', emoji: '😀', mixed: '\\\ufffd' });
  expect(findUnstorableText(out, 'x')).toBeNull();
});
