import { hash } from 'node:crypto';

/**
 * A cached answer as stored (Redis or Postgres), with what makes a bad one recognisable: the key it was written
 * under (an entry found under another key, poisoned or mixed up, is refused) and the digest of its body (a torn or
 * altered one is refused). A refused entry is dropped and the request answered as a miss.
 */

export type EntryKind = 'json' | 'raw' | 'sse';

export interface CacheEntry {
  v: 1;
  key: string;
  /** json: a whole JSON answer; raw: the upstream's bytes with their content type; sse: a stream's events. */
  kind: EntryKind;
  type?: string;
  /** The answer (UTF-8); a stream's with COST_SLOT where its cost comment was. */
  body: string;
  /** The model that answered (a fallback's id when one did). */
  model: string;
  /** What the answer cost when it was called: what each hit saves. */
  costVnd: number;
  /** Epoch ms. */
  createdAt: number;
  digest: string;
}

/** Where a replayed stream's own cost comment goes. */
export const COST_SLOT = '\u0000cost\u0000';

// One-shot hash: createHash() builds a Hash object per call, several µs of a miss's CPU each.
const digestOf = (body: string): string => hash('sha256', body, 'base64url');

export function makeEntry(e: Omit<CacheEntry, 'v' | 'digest'>): CacheEntry {
  return { v: 1, ...e, digest: digestOf(e.body) };
}

/**
 * The stored form: a JSON line of everything but the body, then the body as it is. The body is not a JSON string
 * inside the entry: escaping it on every write and parsing it back on every hit cost more than the rest of the
 * entry's handling together. (Entries of the older form, the whole entry as one JSON object, still decode.)
 */
export function encodeEntry(e: CacheEntry): Buffer {
  const { body, ...head } = e;
  return Buffer.from(`${JSON.stringify(head)}\n${body}`);
}

/** The entry, or null when it is not one written under `key` (corrupt, truncated, poisoned). */
export function decodeEntry(buf: Buffer, key: string): CacheEntry | null {
  let e: Partial<CacheEntry>;
  try {
    const nl = buf.indexOf(10);
    if (nl < 0) e = JSON.parse(buf.toString('utf8'));
    else {
      e = JSON.parse(buf.toString('utf8', 0, nl));
      if (e && typeof e === 'object') e.body = buf.toString('utf8', nl + 1);
    }
  } catch {
    return null;
  }
  if (!e || typeof e !== 'object' || e.v !== 1 || e.key !== key) return null;
  if (e.kind !== 'json' && e.kind !== 'raw' && e.kind !== 'sse') return null;
  if (typeof e.body !== 'string' || typeof e.model !== 'string' || typeof e.digest !== 'string') return null;
  if (!Number.isSafeInteger(e.costVnd) || e.costVnd! < 0 || !Number.isFinite(e.createdAt)) return null;
  if (e.type !== undefined && typeof e.type !== 'string') return null;
  if (digestOf(e.body) !== e.digest) return null;
  return e as CacheEntry;
}
