import { createHash } from 'node:crypto';
import { PassThrough, Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { checkRange, InvalidKeyError, InvalidRangeError, validateKey } from '../../../src/storage/keys';
import { parseContentRange, parseRange, sliceStream } from '../../../src/storage/rangeSlice';
import { DigestCounter } from '../../../src/storage/digest';

/** Storage keys that cannot leave the storage root, HTTP byte ranges, and a range cut out of a stream. */

test('keys: relative slash-separated names of a safe alphabet; their segments', () => {
  expect(validateKey('videos/job_1/video.mp4')).toEqual(['videos', 'job_1', 'video.mp4']);
  expect(validateKey('files/a=b-c_d.jsonl')).toEqual(['files', 'a=b-c_d.jsonl']);
});

test('keys that could traverse, hide or be ambiguous are refused, saying why', () => {
  const why = (key: string) => {
    try {
      validateKey(key);
    } catch (e) {
      expect(e).toBeInstanceOf(InvalidKeyError);
      return (e as Error).message.replace(/^invalid storage key "[^"]*": /, '');
    }
    return 'accepted';
  };
  expect(why('')).toBe('empty');
  expect(why('../etc/passwd')).toBe("'..' segment");
  expect(why('a/./b')).toBe("'.' segment");
  expect(why('/abs')).toBe('absolute path');
  expect(why('C:stuff')).toBe('absolute path');
  expect(why('a\\b')).toBe('contains a backslash');
  expect(why('a\u0000b')).toBe('contains NUL');
  expect(why('a//b')).toBe('empty segment');
  expect(why('a/')).toBe('empty segment');
  expect(why('a/.hidden')).toMatch(/starts with '.'/); // the fs driver's temp files are dot files
  expect(why('a/b c')).toMatch(/outside \[A-Za-z0-9._=-\]/);
  expect(why('x'.repeat(1025))).toBe('longer than 1024 characters');
  expect(why('x'.repeat(1024))).toBe('accepted');
  expect(() => validateKey('k'.repeat(5000) + '/..')).toThrow(/^invalid storage key "k{200}": /); // quoted short
});

test('a byte range is whole, inclusive and in order', () => {
  expect(() => checkRange('k', { start: 0, end: 0 })).not.toThrow();
  for (const r of [
    { start: -1, end: 5 },
    { start: 5, end: 4 },
    { start: 0.5, end: 4 },
    { start: 0, end: Number.MAX_SAFE_INTEGER + 2 },
  ])
    expect(() => checkRange('k', r)).toThrow(InvalidRangeError);
  expect(new InvalidRangeError('k', { start: 9, end: 12 }, 5).message).toBe(
    'range 9-12 not satisfiable for k (size 5)',
  );
});

test('Range headers: first-last, first-, -suffix; clamped to the size; several or malformed: the whole file', () => {
  expect(parseRange('bytes=0-99', 1000)).toEqual({ start: 0, end: 99 });
  expect(parseRange('bytes=900-', 1000)).toEqual({ start: 900, end: 999 });
  expect(parseRange('bytes=900-5000', 1000)).toEqual({ start: 900, end: 999 });
  expect(parseRange('bytes=-100', 1000)).toEqual({ start: 900, end: 999 });
  expect(parseRange('bytes=-5000', 1000)).toEqual({ start: 0, end: 999 });
  expect(parseRange(' bytes= 1 - 2 ', 10)).toEqual({ start: 1, end: 2 });
  expect(parseRange('bytes=1000-', 1000)).toBe('unsatisfiable');
  expect(parseRange('bytes=-0', 1000)).toBe('unsatisfiable');
  expect(parseRange('bytes=0-', 0)).toBe('unsatisfiable');
  for (const h of ['bytes=0-1,5-6', 'bytes=-', 'items=0-1', 'bytes=5-2', 'bytes=a-b', ''])
    expect(parseRange(h, 1000)).toBeNull();
});

test('Content-Range of an answer', () => {
  expect(parseContentRange('bytes 0-99/1000')).toEqual({ first: 0, last: 99 });
  expect(parseContentRange('bytes 5-9/*')).toEqual({ first: 5, last: 9 });
  expect(parseContentRange('bytes */1000')).toBeNull();
  expect(parseContentRange(undefined)).toBeNull();
});

async function text(r: Readable): Promise<string> {
  const parts: Buffer[] = [];
  for await (const c of r) parts.push(c as Buffer);
  return Buffer.concat(parts).toString();
}

test('a range cut out of a whole answer, across chunk boundaries; the source stops once it is out', async () => {
  const chunks = ['abcd', 'efgh', 'ijkl', 'mnop'].map((c) => Buffer.from(c));
  expect(await text(sliceStream(Readable.from(chunks), 3, 6))).toBe('defghi');
  expect(await text(sliceStream(Readable.from(chunks), 0, 1))).toBe('a');
  expect(await text(sliceStream(Readable.from(chunks), 14, 100))).toBe('op');
  expect(await text(sliceStream(Readable.from(chunks), 0, 0))).toBe('');
  const source = new PassThrough();
  const out = sliceStream(source, 2, 3);
  source.write('abcdefgh'); // all of the range in the first chunk
  expect(await text(out)).toBe('cde');
  expect(source.destroyed).toBe(true); // the rest of the body is not downloaded
});

test('a source that fails before the range is out fails the slice', async () => {
  const failing = new PassThrough();
  const out = sliceStream(failing, 0, 10);
  failing.write('abc');
  failing.destroy(new Error('reset by peer'));
  await expect(text(out)).rejects.toThrow('reset by peer');
});

test('the digest counts and hashes what passes, unchanged (the ETag S3 gives a one-part object)', async () => {
  const d = new DigestCounter();
  const sink = new PassThrough();
  const got = text(sink);
  await pipeline(Readable.from([Buffer.from('hello '), Buffer.from('world')]), d, sink);
  expect(await got).toBe('hello world');
  expect(d.bytes).toBe(11);
  expect(d.etag()).toBe(`"${createHash('md5').update('hello world').digest('hex')}"`);
});
