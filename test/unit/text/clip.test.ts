import { clip, clipJson, MAX_ECHO } from '../../../src/text/clip';

/** A client's value as an error message quotes it: whole when short, cut and marked when long, never half a pair. */

test('short values are whole; long ones are cut to the maximum, the cut marked', () => {
  expect(clip('model-x')).toBe('model-x');
  expect(clip('x'.repeat(MAX_ECHO))).toBe('x'.repeat(MAX_ECHO));
  const long = clip('x'.repeat(100_000));
  expect(long).toBe(`${'x'.repeat(MAX_ECHO - 1)}…`);
  expect(long.length).toBe(MAX_ECHO);
  expect(clip('abcdef', 4)).toBe('abc…');
});

test('a cut never splits a surrogate pair', () => {
  // '😀' is two UTF-16 units; with max 4 the cut would fall after its first half.
  expect(clip('ab😀cd', 4)).toBe('ab…');
  expect(clip('abc😀d', 4)).toBe('abc…');
  for (let max = 2; max < 12; max++) {
    const out = clip('😀'.repeat(10), max);
    expect(out.length).toBeLessThanOrEqual(max);
    expect(out).toBe(Buffer.from(out, 'utf8').toString('utf8')); // no lone surrogate: round-trips through UTF-8
  }
});

test('any value as JSON, clipped; a value JSON cannot write becomes its type', () => {
  expect(clipJson('k')).toBe('"k"');
  expect(clipJson(5)).toBe('5');
  expect(clipJson(null)).toBe('null');
  expect(clipJson({ a: [1] })).toBe('{"a":[1]}');
  expect(clipJson(undefined)).toBe('undefined');
  expect(clipJson(10n)).toBe('bigint');
  expect(clipJson('x'.repeat(1000), 10)).toBe('"xxxxxxxx…');
});
