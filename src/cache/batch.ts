import type { EntryOwner } from './store';
import { digestOf, entryHead, type EntryKind, type NewEntry } from './entry';

/**
 * Entries waiting to be written together (./pgStore.ts, ./redisStore.ts), their bytes copied into one buffer of the
 * batch's own, reused from batch to batch, and their owners' fields into arrays. An entry waits up to a flush
 * interval (50 to 100 ms): kept as a Buffer and an object of its own, each outlived a few young-generation
 * collections and was promoted, which showed as garbage collection in a miss's CPU (measured: twice the collector's
 * time of the same requests with the writes left out). Copied here, the entry's own Buffer dies with its request.
 *
 * A new answer (NewEntry) is kept as its body and fields: its stored form (./entry.ts: the header line with the
 * body's digest, then the body) is made by packed(), for the whole batch in one loop, or by get() for a hit on it.
 * An entry given as a Buffer is its stored form already.
 */
export class EntryBatch {
  private buf = Buffer.allocUnsafeSlow(64 * 1024);
  /** Bytes used in `buf`. */
  used = 0;
  readonly keys: string[] = [];
  readonly accounts: string[] = [];
  readonly models: string[] = [];
  readonly projects: (string | null)[] = [];
  /** Each entry's offset in the bytes and its size (a new answer's body; else its stored form). */
  readonly offsets: number[] = [];
  readonly sizes: number[] = [];
  /** Epoch ms. */
  readonly expires: number[] = [];
  readonly created: number[] = [];
  readonly ttls: number[] = [];
  /** A new answer's fields for its header line (kind null: the entry was given in its stored form). */
  private readonly kinds: (EntryKind | null)[] = [];
  private readonly types: (string | undefined)[] = [];
  private readonly answered: string[] = [];
  private readonly costs: number[] = [];
  private readonly entryCreated: number[] = [];
  /** Where each key is (its latest entry, when put twice). */
  private readonly at = new Map<string, number>();

  get size(): number {
    return this.keys.length;
  }

  /** To be written now rather than at the flush interval: `maxEntries` entries, or 4 MiB of them. */
  full(maxEntries: number): boolean {
    return this.keys.length >= maxEntries || this.used >= 4 * 1024 * 1024;
  }

  add(
    key: string,
    owner: EntryOwner,
    value: Buffer | NewEntry,
    ttlSeconds: number,
    expiresAt: number,
    createdAt: number,
  ): void {
    const bytes = Buffer.isBuffer(value) ? value : value.body;
    const size = bytes.length;
    if (this.used + size > this.buf.length) {
      const bigger = Buffer.allocUnsafeSlow(Math.max(this.buf.length * 2, this.used + size));
      this.buf.copy(bigger, 0, 0, this.used);
      this.buf = bigger;
    }
    bytes.copy(this.buf, this.used);
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
    if (Buffer.isBuffer(value)) {
      this.kinds.push(null);
      this.types.push(undefined);
      this.answered.push('');
      this.costs.push(0);
      this.entryCreated.push(0);
    } else {
      this.kinds.push(value.kind);
      this.types.push(value.type);
      this.answered.push(value.model);
      this.costs.push(value.costVnd);
      this.entryCreated.push(value.createdAt);
    }
    this.used += size;
  }

  has(key: string): boolean {
    return this.at.has(key);
  }

  /** The stored form's header line of entry `i`, or null when it was given in its stored form. */
  private headOf(i: number): string | null {
    const kind = this.kinds[i];
    if (kind === null) return null;
    const body = this.buf.subarray(this.offsets[i], this.offsets[i] + this.sizes[i]);
    const digest = digestOf(body);
    return entryHead(this.keys[i], kind, this.types[i], this.answered[i], this.costs[i], this.entryCreated[i], digest);
  }

  /** The entry waiting under `key`, in its stored form (a copy: the batch's buffer is reused once written), or null. */
  get(key: string): Buffer | null {
    const i = this.at.get(key);
    if (i === undefined) return null;
    const body = this.buf.subarray(this.offsets[i], this.offsets[i] + this.sizes[i]);
    const head = this.headOf(i);
    return head === null ? Buffer.from(body) : Buffer.concat([Buffer.from(head), body]);
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
   * What a store writes: every live entry's stored form, one after the other, and the entries as JSON, each with its
   * key (k), 1-based offset in the bytes (o) and size (n), TTL (t, seconds), expiry and creation (e, c: epoch ms),
   * account (a), model (m) and project (p, or null); `newest`: the latest creation.
   */
  packed(): { bytes: Buffer; json: string; newest: number } {
    const rows = [];
    const heads: (string | null)[] = [];
    let total = 0;
    let newest = 0;
    for (const i of this.live()) {
      const head = this.headOf(i);
      heads.push(head);
      const n = (head === null ? 0 : Buffer.byteLength(head)) + this.sizes[i];
      rows.push({
        k: this.keys[i],
        o: total + 1,
        n,
        t: this.ttls[i],
        e: this.expires[i],
        c: this.created[i],
        a: this.accounts[i],
        m: this.models[i],
        p: this.projects[i],
      });
      if (this.created[i] > newest) newest = this.created[i];
      total += n;
    }
    const bytes = Buffer.allocUnsafe(total);
    let at = 0;
    let r = 0;
    for (const i of this.live()) {
      const head = heads[r++];
      if (head !== null) at += bytes.write(head, at);
      at += this.buf.copy(bytes, at, this.offsets[i], this.offsets[i] + this.sizes[i]);
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
      this.kinds,
      this.types,
      this.answered,
      this.costs,
      this.entryCreated,
    ])
      a.length = 0;
    // A batch grown for large entries does not keep its size for good.
    if (this.buf.length > 8 * 1024 * 1024) this.buf = Buffer.allocUnsafeSlow(64 * 1024);
  }
}
