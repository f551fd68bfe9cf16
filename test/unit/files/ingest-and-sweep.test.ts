import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { BatchFileIngest } from '../../../src/files/ingest';
import { sweepFileBytes } from '../../../src/files/sweep';
import { FsStorage } from '../../../src/storage/fsStorage';
import type { Db } from '../../../src/db/pool';

/**
 * An upload's bytes through the batch-input check into real (filesystem) storage, and the sweep of gone files'
 * bytes; the files table is an in-memory stand-in for the sweep's two queries.
 */

let dir: string;
let storage: FsStorage;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'files-unit-'));
  storage = new FsStorage(dir);
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

const line = (id: string) =>
  JSON.stringify({ custom_id: id, method: 'POST', url: '/v1/embeddings', body: { model: 'e', input: 'x' } }) + '\n';

async function upload(chunks: string[], maxBytes = 1 << 20): Promise<BatchFileIngest> {
  const ingest = new BatchFileIngest(storage, maxBytes);
  await pipeline(Readable.from(chunks.map((c) => Buffer.from(c))), ingest);
  return ingest;
}

const read = async (key: string) => {
  const parts: Buffer[] = [];
  for await (const c of await storage.get(key)) parts.push(c as Buffer);
  return Buffer.concat(parts).toString();
};

test('a good upload is stored byte for byte under a random key, its requests counted', async () => {
  const text = line('a') + line('b') + line('c');
  const ingest = await upload([text.slice(0, 10), text.slice(10, 100), text.slice(100)]);
  expect(ingest.key).toMatch(/^files\/[0-9a-f]{32}\.jsonl$/);
  expect(ingest.validator).toMatchObject({ problem: null, requests: 3, model: 'e', endpoint: '/v1/embeddings' });
  expect(await ingest.stored).toMatchObject({ size: Buffer.byteLength(text) });
  expect(await read(ingest.key)).toBe(text);
  expect((await upload([line('x')])).key).not.toBe(ingest.key);
});

test('after the first problem the rest is read and dropped; discard deletes what was stored', async () => {
  const ingest = await upload([line('a'), line('a'), line('b'.repeat(1000))]);
  expect(ingest.validator.problem).toMatchObject({ line: 2, code: 'duplicate_custom_id' });
  expect((await ingest.stored).size).toBeLessThanOrEqual(line('a').length * 2); // the lines after were not stored
  await ingest.discard(storage);
  expect(await storage.head(ingest.key)).toBeNull();
});

test('an upload the parser abandons keeps nothing', async () => {
  const ingest = new BatchFileIngest(storage, 1 << 20);
  await new Promise<void>((resolve) => ingest.write(Buffer.from(line('a')), () => resolve()));
  const failed = new Promise((resolve) => ingest.on('error', resolve));
  ingest.destroy(new Error('connection dropped'));
  expect(await failed).toMatchObject({ message: 'connection dropped' });
  await expect(ingest.stored).rejects.toThrow(); // the storage write was cut short
  // The delete runs once storing has ended: wait for it (the test's timeout bounds the wait).
  while ((await storage.head(ingest.key)) !== null) await new Promise((r) => setImmediate(r));
  expect(fs.readdirSync(path.join(dir, 'objects', 'files'), { withFileTypes: true }).filter((e) => e.isFile())).toEqual(
    [],
  );
});

/** The files table as the sweep sees it: rows gone for their account, and which have had their bytes removed. */
function filesTable(gone: { id: string; storage_key: string }[], alreadyRemoved: string[] = []) {
  const removed = new Set(alreadyRemoved);
  const db = {
    query: async (sql: string, params: unknown[]) => {
      if (sql.trimStart().startsWith('SELECT'))
        return { rows: gone.slice(0, params[0] as number), rowCount: gone.length };
      const id = params[0] as string;
      if (removed.has(id)) return { rows: [], rowCount: 0 };
      removed.add(id);
      return { rows: [], rowCount: 1 };
    },
  } as unknown as Db;
  return { db, removed };
}

test("the sweep deletes gone files' bytes and marks them; one another sweep marked first is not counted", async () => {
  const keys = ['files/a.jsonl', 'files/b.jsonl', 'files/c.jsonl'];
  for (const k of keys) await storage.put(k, Readable.from([Buffer.from('x')]), 'application/jsonl');
  const { db, removed } = filesTable(
    keys.map((k, i) => ({ id: `file-${i}`, storage_key: k })),
    ['file-2'], // a concurrent sweep got there first
  );
  expect(await sweepFileBytes(db, storage)).toBe(2);
  for (const k of keys) expect(await storage.head(k)).toBeNull();
  expect([...removed].sort()).toEqual(['file-0', 'file-1', 'file-2']);
  // A key already gone from storage is no error (the delete is idempotent).
  expect(await sweepFileBytes(filesTable([{ id: 'file-9', storage_key: 'files/gone.jsonl' }]).db, storage)).toBe(1);
});

test('the sweep takes at most `limit` files a run', async () => {
  const gone = Array.from({ length: 5 }, (_, i) => ({ id: `file-${i}`, storage_key: `files/${i}.jsonl` }));
  expect(await sweepFileBytes(filesTable(gone).db, storage, { limit: 2 })).toBe(2);
});
