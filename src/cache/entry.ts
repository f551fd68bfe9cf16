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
  /** The answer's bytes as the client got them; a stream's with COST_SLOT where its cost comment was. */
  body: Buffer;
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
export const COST_SLOT_BYTES = Buffer.from(COST_SLOT);

// One-shot hash: createHash() builds a Hash object per call, several µs of a miss's CPU each. Over the body's bytes:
// the same digest as over its text (which is hashed as UTF-8), so entries written with a text body still check.
export const digestOf = (body: Buffer): string => hash('sha256', body, 'base64url');

/** An entry of the answer `body` (its bytes, or its text). */
export function makeEntry(e: Omit<CacheEntry, 'v' | 'digest' | 'body'> & { body: Buffer | string }): CacheEntry {
  const body = typeof e.body === 'string' ? Buffer.from(e.body) : e.body;
  return { v: 1, ...e, body, digest: digestOf(body) };
}

/**
 * An answer to store, its stored form not yet made: a store's batch makes it (digest and header line) when it
 * writes, for every entry of the batch in one loop (./batch.ts). Made on the request path, entry by entry, the same
 * work cost a busy process several times what it costs in that loop.
 */
export type NewEntry = Omit<CacheEntry, 'v' | 'digest'>;

/**
 * The stored form: a JSON line of everything but the body, then the body's bytes as they are. The body is neither a
 * JSON string inside the entry (escaping it on every write and parsing it back on every hit cost more than the rest
 * of the entry's handling together) nor text (the answer's bytes would be decoded and encoded again on each miss and
 * each hit). Entries of the older form, the whole entry as one JSON object, still decode.
 */
export function encodeEntry(e: CacheEntry): Buffer {
  const head = entryHead(e.key, e.kind, e.type, e.model, e.costVnd, e.createdAt, e.digest);
  return Buffer.concat([Buffer.from(head), e.body]);
}

/** The stored form's header line, the newline included (its fields as arguments: no object made per entry). */
export function entryHead(
  key: string,
  kind: EntryKind,
  type: string | undefined,
  model: string,
  costVnd: number,
  createdAt: number,
  digest: string,
): string {
  // Written out rather than JSON.stringify of a head object: the kind, numbers and digest need no escaping.
  const t = type === undefined ? '' : `"type":${JSON.stringify(type)},`;
  return (
    `{"v":1,"key":${JSON.stringify(key)},"kind":"${kind}",${t}"model":${JSON.stringify(model)},` +
    `"costVnd":${costVnd},"createdAt":${createdAt},"digest":"${digest}"}\n`
  );
}

/** The entry, or null when it is not one written under `key` (corrupt, truncated, poisoned). */
export function decodeEntry(buf: Buffer, key: string): CacheEntry | null {
  let e: Partial<Omit<CacheEntry, 'body'>> & { body?: unknown };
  try {
    const nl = buf.indexOf(10);
    if (nl < 0) {
      e = JSON.parse(buf.toString('utf8'));
      if (e && typeof e === 'object' && typeof e.body === 'string') e.body = Buffer.from(e.body);
    } else {
      e = JSON.parse(buf.toString('utf8', 0, nl));
      if (e && typeof e === 'object') e.body = buf.subarray(nl + 1);
    }
  } catch {
    return null;
  }
  if (!e || typeof e !== 'object' || e.v !== 1 || e.key !== key) return null;
  if (e.kind !== 'json' && e.kind !== 'raw' && e.kind !== 'sse') return null;
  if (!Buffer.isBuffer(e.body) || typeof e.model !== 'string' || typeof e.digest !== 'string') return null;
  if (!Number.isSafeInteger(e.costVnd) || e.costVnd! < 0 || !Number.isFinite(e.createdAt)) return null;
  if (e.type !== undefined && typeof e.type !== 'string') return null;
  if (digestOf(e.body) !== e.digest) return null;
  return e as CacheEntry;
}
