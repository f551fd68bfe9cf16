/**
 * The keys a store holds, with their expiry, in memory (./pgStore.ts, ./redisStore.ts): a key it does not hold is a
 * miss without a query. Each key is kept as a 30-bit number (its first hex digits: keys are sha256 digests) and its
 * expiry as whole seconds since the index was made: both small integers, which a Map holds without an object of
 * their own. Kept as the key's text and its expiry in ms, every entry stored was two objects more in the old
 * generation for as long as it lived (a 64-character string and a boxed number: over 100 bytes, and the garbage
 * collector's marking of them), at a thousand misses a second and an hour's TTL some 400 MB.
 *
 * Two keys may share a number (one in a billion per pair): the index then says "maybe" for a key it does not hold,
 * and the store looks it up (a miss that cost a query), and forgetting one forgets both (the other's next request is
 * a miss that could have been a hit). Neither is ever a wrong answer: the entry read is checked against its key.
 */
export class KeyIndex {
  private readonly map = new Map<number, number>();
  private readonly base = Math.floor(Date.now() / 1000) - 1;

  static id(key: string): number {
    const n = parseInt(key.slice(0, 8), 16);
    if (n === n) return n >>> 2;
    // Not hex (no key the cache makes): a string hash.
    let h = 0;
    for (let i = 0; i < key.length; i++) h = (Math.imul(h, 31) + key.charCodeAt(i)) | 0;
    return h >>> 2;
  }

  get size(): number {
    return this.map.size;
  }

  /** The key's expiry (epoch ms, to the second above), or undefined when it is not held. */
  get(key: string): number | undefined {
    const s = this.map.get(KeyIndex.id(key));
    return s === undefined ? undefined : (this.base + s) * 1000;
  }

  has(key: string): boolean {
    return this.map.has(KeyIndex.id(key));
  }

  /** Holds `key` until `expiresAt` (epoch ms). */
  set(key: string, expiresAt: number): void {
    const id = KeyIndex.id(key);
    const s = Math.max(1, Math.ceil(expiresAt / 1000) - this.base);
    const was = this.map.get(id);
    // Sharing its number with another key: the later expiry (the other is then looked up for nothing, never lost).
    this.map.set(id, was !== undefined && was > s ? was : s);
  }

  delete(key: string): void {
    this.map.delete(KeyIndex.id(key));
  }

  /** Forgets up to `n` expired keys, oldest first, moving the live ones it looked at to the end. */
  prune(n: number): void {
    const now = Math.floor(Date.now() / 1000) - this.base;
    let seen = 0;
    for (const [id, s] of this.map) {
      if (++seen > n) break;
      this.map.delete(id);
      if (s > now) this.map.set(id, s);
    }
  }
}
