import { createHash, randomFillSync } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import v8 from 'node:v8';
import vm from 'node:vm';
import { Readable } from 'node:stream';
import { fork, type ChildProcess } from 'node:child_process';
import { FsStorage } from '../../src/storage/fsStorage';
import { S3Storage } from '../../src/storage/s3Storage';
import { InvalidKeyError, InvalidRangeError, ObjectNotFoundError } from '../../src/storage/keys';
import type { Storage } from '../../src/storage/storage';

/**
 * One contract, two drivers: the filesystem driver on a temp dir and the S3 driver against s3rver, a real
 * S3-compatible HTTP server started in this process.
 */
const MiB = 1024 * 1024;
let tmpRoot: string;
let s3rver: ChildProcess;
let s3Endpoint: string;

beforeAll(async () => {
  tmpRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'storage-test-'));
  // Out of process: the memory bounds below are about the S3 client, not the server's buffers.
  s3rver = fork(path.join(__dirname, '..', 'support', 's3rverChild.js'), [path.join(tmpRoot, 's3rver')], {
    stdio: 'ignore',
  });
  const port = await new Promise<number>((resolve, reject) => {
    s3rver.once('message', (m) => resolve((m as { port: number }).port));
    s3rver.once('exit', (code) => reject(new Error(`s3rver exited (${code})`)));
  });
  s3Endpoint = `http://127.0.0.1:${port}`;
  // s3rver accepts this fixed key pair; the driver reads credentials from the standard AWS env vars.
  process.env.AWS_ACCESS_KEY_ID = 'S3RVER';
  process.env.AWS_SECRET_ACCESS_KEY = 'S3RVER';
});
afterAll(async () => {
  s3rver?.kill();
  fs.rmSync(tmpRoot, { recursive: true, force: true });
});

let seq = 0;
const drivers: Array<[string, () => Storage]> = [
  ['fs', () => new FsStorage(path.join(tmpRoot, `fs-${++seq}`))],
  // A fresh bucket per test file run proves the driver creates a missing bucket on first use.
  [
    's3',
    () =>
      new S3Storage({
        bucket: `media-${process.pid}-${++seq}`,
        endpoint: s3Endpoint,
        region: 'us-east-1',
        forcePathStyle: true,
      }),
  ],
];

async function readAll(r: Readable): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of r) parts.push(c as Buffer);
  return Buffer.concat(parts);
}
const body = (s: string | Buffer) => Readable.from([Buffer.from(s)]);

// Memory is measured as live JS heap + external memory (Buffers) after a forced collection: unlike RSS it is
// neither inflated by V8 freeing spent chunks lazily nor hidden by the allocator reusing memory that earlier test
// files released. Samples are taken per 8 MB moved, not on a timer, so the few full collections cost little.
v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;
const SAMPLE_EVERY = 8 * MiB;

function liveBytes(): number {
  const m = process.memoryUsage();
  return m.heapUsed + m.external;
}

/** Peak growth of live memory over a baseline, sampled as data moves. */
class MemoryProbe {
  private readonly base: number;
  private peak: number;
  private sinceSample = 0;
  constructor() {
    gc();
    this.base = this.peak = liveBytes();
  }
  moved(bytes: number): void {
    this.sinceSample += bytes;
    if (this.sinceSample < SAMPLE_EVERY) return;
    this.sinceSample = 0;
    gc();
    this.peak = Math.max(this.peak, liveBytes());
  }
  get growth(): number {
    return this.peak - this.base;
  }
}

/** Random bytes, generated chunk by chunk so the test itself never holds the whole object. */
function generated(
  totalBytes: number,
  probe: MemoryProbe,
  chunkBytes = 256 * 1024,
): { stream: Readable; md5: () => string } {
  const hash = createHash('md5');
  let produced = 0;
  const stream = new Readable({
    read() {
      if (produced >= totalBytes) return void this.push(null);
      probe.moved(chunkBytes);
      const n = Math.min(chunkBytes, totalBytes - produced);
      const chunk = randomFillSync(Buffer.allocUnsafe(n));
      produced += n;
      hash.update(chunk);
      this.push(chunk);
    },
  });
  return { stream, md5: () => hash.digest('hex') };
}

describe.each(drivers)('%s storage', (name, make) => {
  let st: Storage;
  beforeAll(() => {
    st = make();
  });

  test('put then head and get return the same bytes, size, ETag and content type', async () => {
    const put = await st.put('videos/job-1/video.mp4', body('hello, storage'), 'video/mp4');
    expect(put.size).toBe(14);
    expect(put.etag).toMatch(/^"[^"]+"$/);
    expect(put.contentType).toBe('video/mp4');
    expect(await st.head('videos/job-1/video.mp4')).toEqual(put);
    expect((await readAll(await st.get('videos/job-1/video.mp4'))).toString()).toBe('hello, storage');
  });

  test('an overwrite replaces the object and changes the ETag', async () => {
    const a = await st.put('over/write.bin', body('first version'), 'application/octet-stream');
    const b = await st.put('over/write.bin', body('second, longer version'), 'image/png');
    expect(b.etag).not.toBe(a.etag);
    expect(await st.head('over/write.bin')).toEqual(b);
    expect((await readAll(await st.get('over/write.bin'))).toString()).toBe('second, longer version');
  });

  test('an empty object is stored', async () => {
    const put = await st.put('empty/zero', Readable.from([]), 'text/plain');
    expect(put.size).toBe(0);
    expect((await st.head('empty/zero'))?.size).toBe(0);
    expect((await readAll(await st.get('empty/zero'))).length).toBe(0);
  });

  test('inclusive byte ranges, an end past the last byte clamps, a start past the end is refused', async () => {
    await st.put('range/abc', body('0123456789'), 'text/plain');
    expect((await readAll(await st.get('range/abc', { start: 0, end: 0 }))).toString()).toBe('0');
    expect((await readAll(await st.get('range/abc', { start: 2, end: 5 }))).toString()).toBe('2345');
    expect((await readAll(await st.get('range/abc', { start: 9, end: 9 }))).toString()).toBe('9');
    expect((await readAll(await st.get('range/abc', { start: 7, end: 100 }))).toString()).toBe('789');
    await expect(st.get('range/abc', { start: 10, end: 12 })).rejects.toBeInstanceOf(InvalidRangeError);
    await expect(st.get('range/abc', { start: 5, end: 4 })).rejects.toBeInstanceOf(InvalidRangeError);
    await expect(st.get('range/abc', { start: -1, end: 4 })).rejects.toBeInstanceOf(InvalidRangeError);
  });

  test('head of a missing key is null, get of a missing key is ObjectNotFoundError', async () => {
    expect(await st.head('missing/key')).toBeNull();
    expect(await st.head('range/abc/deeper')).toBeNull();
    await expect(st.get('missing/key')).rejects.toBeInstanceOf(ObjectNotFoundError);
    await expect(st.get('missing/key', { start: 0, end: 1 })).rejects.toBeInstanceOf(ObjectNotFoundError);
  });

  test('delete removes the object and is idempotent', async () => {
    await st.put('del/me', body('bye'), 'text/plain');
    await st.delete('del/me');
    expect(await st.head('del/me')).toBeNull();
    await expect(st.get('del/me')).rejects.toBeInstanceOf(ObjectNotFoundError);
    await expect(st.delete('del/me')).resolves.toBeUndefined();
  });

  test('a body that fails midway stores nothing', async () => {
    const failing = new Readable({
      read() {
        this.push(Buffer.alloc(64 * 1024, 1));
        setImmediate(() => this.destroy(new Error('upstream connection reset')));
      },
    });
    await expect(st.put('broken/upload', failing, 'video/mp4')).rejects.toThrow();
    expect(await st.head('broken/upload')).toBeNull();
    if (st instanceof FsStorage) {
      // No temp file left behind next to where the object would have been.
      const dir = path.join(st.dir, 'objects', 'broken');
      expect(fs.existsSync(dir) ? fs.readdirSync(dir) : []).toEqual([]);
    }
  });

  test.each([
    '../escape',
    'a/../../escape',
    '..',
    '.',
    '/etc/passwd',
    'a\0b',
    '',
    'a//b',
    './a',
    'a/./b',
    'C:/windows',
    'a\\..\\b',
    '.hidden',
    'videos/.a.tmp',
    'a/',
    'sp ace',
    'x'.repeat(1025),
  ])('the key %j is refused by every operation', async (key) => {
    await expect(st.put(key, body('x'), 'text/plain')).rejects.toBeInstanceOf(InvalidKeyError);
    await expect(st.head(key)).rejects.toBeInstanceOf(InvalidKeyError);
    await expect(st.get(key)).rejects.toBeInstanceOf(InvalidKeyError);
    await expect(st.delete(key)).rejects.toBeInstanceOf(InvalidKeyError);
  });

  test('a 64 MB object streams in and out with bounded memory', async () => {
    const size = 64 * MiB;
    const upProbe = new MemoryProbe();
    const src = generated(size, upProbe);
    const put = await st.put('big/video.mp4', src.stream, 'video/mp4');
    expect(put.size).toBe(size);
    expect((await st.head('big/video.mp4'))?.size).toBe(size);

    const downProbe = new MemoryProbe();
    const h = createHash('md5');
    let n = 0;
    for await (const c of await st.get('big/video.mp4')) {
      h.update(c as Buffer);
      n += (c as Buffer).length;
      downProbe.moved((c as Buffer).length);
    }
    expect({ n, md5: h.digest('hex') }).toEqual({ n: size, md5: src.md5() });

    // A driver that buffered the object would hold ~60 MB live at the last samples; streaming holds a few parts
    // (S3 upload: about partSize x (queueSize + 1); the server runs in its own process).
    if (process.env.LOG_LEVEL)
      console.log(
        `${name}: live memory growth ` +
          `put ${(upProbe.growth / MiB).toFixed(1)} MiB, get ${(downProbe.growth / MiB).toFixed(1)} MiB`,
      );
    expect(upProbe.growth).toBeLessThan(45 * MiB);
    expect(downProbe.growth).toBeLessThan(45 * MiB);

    const tail = await readAll(await st.get('big/video.mp4', { start: size - 10, end: size - 1 }));
    expect(tail.length).toBe(10);
  }, 180_000); // 128 MB through the driver with memory probes: minutes on a loaded 2-core machine
});
