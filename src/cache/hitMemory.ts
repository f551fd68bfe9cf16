/**
 * The entries recently hit, kept in this process up to `maxBytes` (least recently used out first), so that the next
 * hit on one asks the storage nothing (./pgStore.ts, ./redisStore.ts). An entry is kept from its first hit, not from
 * its write: most stored answers are never asked for again. Each is kept until its expiry or, when the store sets
 * one, until `until`: the Redis store keeps an entry a second at a time, so that a purge made by another process
 * reaches this one within that second.
 */
export class HitMemory {
  private readonly map = new Map<string, { buf: Buffer; expiresAt: number; until: number }>();
  private used = 0;

  constructor(private readonly maxBytes = 32 * 1024 * 1024) {}

  /** The entry's bytes, or undefined (not kept, expired, or past its `until`: then forgotten). */
  get(key: string, now: number): Buffer | undefined {
    const m = this.map.get(key);
    if (!m) return undefined;
    this.map.delete(key);
    if (m.expiresAt <= now || m.until <= now) {
      this.used -= m.buf.length;
      return undefined;
    }
    // Most recently used last: eviction takes the first.
    this.map.set(key, m);
    return m.buf;
  }

  /** Keeps `read` (an entry just read from the storage) until `expiresAt`, or `until` when sooner. */
  set(key: string, read: Buffer, expiresAt: number, until = Infinity): void {
    if (read.length > this.maxBytes / 8) return;
    // In a buffer of its own: a small one is a slice of a shared 8 KB slab, which it would keep alive.
    let buf = read;
    if (read.byteLength !== read.buffer.byteLength) read.copy((buf = Buffer.allocUnsafeSlow(read.length)));
    this.delete(key);
    this.map.set(key, { buf, expiresAt, until });
    this.used += buf.length;
    for (const [k, v] of this.map) {
      if (this.used <= this.maxBytes) break;
      this.map.delete(k);
      this.used -= v.buf.length;
    }
  }

  delete(key: string): void {
    const m = this.map.get(key);
    if (m) {
      this.map.delete(key);
      this.used -= m.buf.length;
    }
  }
}
