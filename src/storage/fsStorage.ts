import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Storage, StoredObject } from './storage';
import { DigestCounter } from './digest';
import { checkRange, InvalidRangeError, ObjectNotFoundError, validateKey } from './keys';

/** What the sidecar file holds next to each object (no xattrs: they are not portable across filesystems). */
interface Meta {
  size: number;
  etag: string;
  contentType: string;
}

function isNotFound(e: unknown): boolean {
  return (e as NodeJS.ErrnoException)?.code === 'ENOENT' || (e as NodeJS.ErrnoException)?.code === 'ENOTDIR';
}

/**
 * Filesystem storage (the default). Layout under `dir`:
 *   objects/<key>     the bytes
 *   meta/<key>.json   {size, etag, contentType}
 * Keeping metadata in a separate tree means no object key can collide with a sidecar name.
 * Writes go to a temp file in the target directory and are renamed into place, so readers see either the old
 * object or the complete new one, never a partial file.
 */
export class FsStorage implements Storage {
  private readonly objectsDir: string;
  private readonly metaDir: string;

  constructor(readonly dir: string) {
    this.objectsDir = path.resolve(dir, 'objects');
    this.metaDir = path.resolve(dir, 'meta');
  }

  private paths(key: string): { data: string; meta: string } {
    const segments = validateKey(key);
    const data = path.join(this.objectsDir, ...segments);
    const meta = path.join(this.metaDir, ...segments) + '.json';
    // Belt and braces: validateKey already refuses anything that could leave the root.
    if (!data.startsWith(this.objectsDir + path.sep) || !meta.startsWith(this.metaDir + path.sep)) {
      throw new Error(`storage key escapes the storage root: ${key}`);
    }
    return { data, meta };
  }

  async put(key: string, body: Readable, contentType: string): Promise<StoredObject> {
    const { data, meta } = this.paths(key);
    await fsp.mkdir(path.dirname(data), { recursive: true });
    await fsp.mkdir(path.dirname(meta), { recursive: true });
    const tmp = tempName(data);
    const digest = new DigestCounter();
    try {
      // flush: fsync before close, so the rename below never publishes a file whose bytes are still in cache.
      await pipeline(body, digest, fs.createWriteStream(tmp, { flags: 'wx', flush: true }));
      const obj: Meta = { size: digest.bytes, etag: digest.etag(), contentType };
      await fsp.rename(tmp, data);
      await writeFileAtomic(meta, JSON.stringify(obj));
      await syncDir(path.dirname(data));
      return obj;
    } catch (e) {
      await fsp.rm(tmp, { force: true });
      throw e;
    }
  }

  async head(key: string): Promise<StoredObject | null> {
    const { data, meta } = this.paths(key);
    let size: number;
    try {
      const st = await fsp.stat(data);
      if (!st.isFile()) return null;
      size = st.size;
    } catch (e) {
      if (isNotFound(e)) return null;
      throw e;
    }
    return this.describe(meta, size);
  }

  async get(key: string, range?: { start: number; end: number }): Promise<Readable> {
    const { data } = this.paths(key);
    if (range) checkRange(key, range);
    let handle: fsp.FileHandle;
    try {
      // Opening first pins this version of the file: a concurrent put renames a new inode into place, and a
      // concurrent delete unlinks the name, but the open handle keeps reading the bytes it was opened on.
      handle = await fsp.open(data, 'r');
    } catch (e) {
      if (isNotFound(e)) throw new ObjectNotFoundError(key);
      throw e;
    }
    try {
      const st = await handle.stat();
      if (!st.isFile()) throw new ObjectNotFoundError(key);
      if (!range) return handle.createReadStream({ autoClose: true });
      if (range.start >= st.size) throw new InvalidRangeError(key, range, st.size);
      // As in HTTP, an end past the last byte means "to the end".
      return handle.createReadStream({ start: range.start, end: Math.min(range.end, st.size - 1), autoClose: true });
    } catch (e) {
      await handle.close();
      throw e;
    }
  }

  async delete(key: string): Promise<void> {
    const { data, meta } = this.paths(key);
    await fsp.rm(data, { force: true });
    await fsp.rm(meta, { force: true });
  }

  /** Reads the sidecar; if a crash left it missing or stale (size differs), describes the bytes that are there. */
  private async describe(metaPath: string, size: number): Promise<StoredObject> {
    try {
      const m = JSON.parse(await fsp.readFile(metaPath, 'utf8')) as Meta;
      if (m.size === size && typeof m.etag === 'string' && typeof m.contentType === 'string') return m;
    } catch (e) {
      if (!isNotFound(e) && !(e instanceof SyntaxError)) throw e;
    }
    return { size, etag: `W/"${size.toString(16)}"`, contentType: 'application/octet-stream' };
  }
}

function tempName(target: string): string {
  return path.join(path.dirname(target), `.${path.basename(target)}.${randomBytes(6).toString('hex')}.tmp`);
}

async function writeFileAtomic(target: string, content: string): Promise<void> {
  const tmp = tempName(target);
  try {
    await fsp.writeFile(tmp, content, { flag: 'wx', flush: true });
    await fsp.rename(tmp, target);
  } catch (e) {
    await fsp.rm(tmp, { force: true });
    throw e;
  }
}

/** fsync the directory so the rename itself survives a power loss (best effort: not every platform allows it). */
async function syncDir(dir: string): Promise<void> {
  let h: fsp.FileHandle | undefined;
  try {
    h = await fsp.open(dir, 'r');
    await h.sync();
  } catch {
    // Some filesystems refuse fsync on directories; the data file itself is already synced.
  } finally {
    await h?.close();
  }
}
