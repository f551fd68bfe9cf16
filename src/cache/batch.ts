import type { EntryOwner } from './store';
import type { EncodedEntry } from './entry';

/**
 * Entries waiting to be written together (./pgStore.ts, ./redisStore.ts), their bytes copied into one buffer of the
 * batch's own, reused from batch to batch, and their owners' fields into arrays. An entry waits up to a flush
 * interval (50 to 100 ms): kept as a Buffer and an object of its own, each outlived a few young-generation
 * collections and was promoted, which showed as garbage collection in a miss's CPU (measured: twice the collector's
 * time of the same requests with the writes left out). Copied here, the entry's own Buffer dies with its request.
 */
export class EntryBatch {
  private buf = Buffer.allocUnsafeSlow(64 * 1024);
  /** Bytes used in `buf`. */
  used = 0;
  readonly keys: string[] = [];
  readonly accounts: string[] = [];
  readonly models: string[] = [];
  readonly projects: (string | null)[] = [];
  /** Each entry's offset in the bytes and its size. */
  readonly offsets: number[] = [];
  readonly sizes: number[] = [];
  /** Epoch ms. */
  readonly expires: number[] = [];
  readonly created: number[] = [];
  readonly ttls: number[] = [];
  /** Where each key is (its latest entry, when put twice). */
  private readonly at = new Map<string, number>();

  get size(): number {
    return this.keys.length;
  }

  add(
    key: string,
    owner: EntryOwner,
    value: Buffer | EncodedEntry,
    ttlSeconds: number,
    expiresAt: number,
    createdAt: number,
  ): void {
    const size = Buffer.isBuffer(value) ? value.length : value.size;
    if (this.used + size > this.buf.length) {
      const bigger = Buffer.allocUnsafeSlow(Math.max(this.buf.length * 2, this.used + size));
      this.buf.copy(bigger, 0, 0, this.used);
      this.buf = bigger;
    }
    if (Buffer.isBuffer(value)) value.copy(this.buf, this.used);
    else value.body.copy(this.buf, this.used + this.buf.write(value.head, this.used));
    const i = this.keys.length;
    const was = this.at.get(key);
    // Put again while waiting: the earlier one is not written (one row per key in a statement).
    if (was !== undefined) this.sizes[was] = -1;
    this.at.set(key, i);
    this.keys.push(key);
    this.accounts.push(owner.accountId);
    this.models.push(owner.model);
    this.projects.push(owner.projectId);
    this.offsets.push(this.used);
    this.sizes.push(size);
    this.expires.push(expiresAt);
    this.created.push(createdAt);
    this.ttls.push(ttlSeconds);
    this.used += size;
  }

  has(key: string): boolean {
    return this.at.has(key);
  }

  /** The entry waiting under `key`, as a copy (the batch's buffer is reused once written), or null. */
  get(key: string): Buffer | null {
    const i = this.at.get(key);
    if (i === undefined) return null;
    return Buffer.from(this.buf.subarray(this.offsets[i], this.offsets[i] + this.sizes[i]));
  }

  /** Forgets the entry waiting under `key` (it is not written). */
  delete(key: string): void {
    const i = this.at.get(key);
    if (i === undefined) return;
    this.sizes[i] = -1;
    this.at.delete(key);
  }

  /** The entries to write, in order (each key once: an entry put again, or forgotten, left out). */
  *live(): Generator<number> {
    for (let i = 0; i < this.keys.length; i++) if (this.sizes[i] >= 0) yield i;
  }

  /**
   * What a store writes: every live entry's bytes, one after the other, and the entries as JSON, each with its key
   * (k), 1-based offset in the bytes (o) and size (n), TTL (t, seconds), expiry and creation (e, c: epoch ms),
   * account (a), model (m) and project (p, or null); `newest`: the latest creation.
   */
  packed(): { bytes: Buffer; json: string; newest: number } {
    const rows = [];
    let gaps = false;
    let at = 1;
    let newest = 0;
    for (const i of this.live()) {
      if (this.offsets[i] !== at - 1) gaps = true;
      rows.push({
        k: this.keys[i],
        o: at,
        n: this.sizes[i],
        t: this.ttls[i],
        e: this.expires[i],
        c: this.created[i],
        a: this.accounts[i],
        m: this.models[i],
        p: this.projects[i],
      });
      if (this.created[i] > newest) newest = this.created[i];
      at += this.sizes[i];
    }
    let bytes = this.buf.subarray(0, at - 1);
    if (gaps) {
      bytes = Buffer.allocUnsafe(at - 1);
      for (const [r, i] of [...this.live()].entries())
        this.buf.copy(bytes, rows[r].o - 1, this.offsets[i], this.offsets[i] + this.sizes[i]);
    }
    return { bytes, json: JSON.stringify(rows), newest };
  }

  clear(): void {
    this.used = 0;
    this.at.clear();
    for (const a of [
      this.keys,
      this.accounts,
      this.models,
      this.projects,
      this.offsets,
      this.sizes,
      this.expires,
      this.created,
      this.ttls,
    ])
      a.length = 0;
    // A batch grown for large entries does not keep its size for good.
    if (this.buf.length > 4 * 1024 * 1024) this.buf = Buffer.allocUnsafeSlow(64 * 1024);
  }
}
