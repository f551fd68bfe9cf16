import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * The bank feeds' webhooks, read into one shape: SePay's (one transfer per call, `Authorization: Apikey <key>` or
 * an HMAC-SHA256 signature) and Casso's v2 (`X-Casso-Signature: t=<ms>,v1=<hex>`, the HMAC-SHA512 under the webhook
 * secret of "<t>.<the body, its object keys sorted at every level, as JSON>"). Nothing here trusts a body before its
 * key or signature is checked, in constant time.
 */

export type Feed = 'sepay' | 'casso';
export type Provider = Feed | 'vnpay';

/** One transfer as a feed reports it. */
export interface IncomingTransfer {
  provider: Provider;
  /** The provider's own id of the transaction: what a credit is keyed on. */
  txnId: string;
  direction: 'in' | 'out';
  /** Whole VND received (always positive). */
  amount: number;
  /** The transfer's content as the bank passed it on (where the memo is looked for). */
  content: string;
  /** A payment code the provider found in the content itself (SePay's `code`), if any. */
  code: string | null;
  accountNumber: string | null;
  reference: string | null;
  transactedAt: Date | null;
}

export class FeedBodyError extends Error {}

export function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** "2024-10-03 15:06:37" in Vietnam's time (the feeds' format); null when absent or unreadable. */
export function vnTime(s: unknown): Date | null {
  if (typeof s !== 'string') return null;
  const m = /^(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2})$/.exec(s.trim());
  const d = m ? new Date(`${m[1]}T${m[2]}+07:00`) : new Date(s);
  return Number.isNaN(d.getTime()) ? null : d;
}

/** A text field of a feed: a NUL (which Postgres's text refuses) makes the body malformed (400), never a 500. */
const str = (v: unknown, field: string): string | null => {
  if (typeof v === 'string' && v.includes('\u0000')) throw new FeedBodyError(`'${field}' must not contain NUL`);
  return typeof v === 'string' ? v : typeof v === 'number' ? String(v) : null;
};

function wholeVnd(v: unknown, field: string): number {
  const n = typeof v === 'string' && /^-?\d+$/.test(v.trim()) ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isSafeInteger(n)) throw new FeedBodyError(`'${field}' must be whole VND`);
  return n;
}

// ---- SePay

/** `Authorization: Apikey <key>` with the configured key (none configured: refused). */
export function sepayAuthorized(key: string | null, header: string | undefined): boolean {
  if (!key || !header) return false;
  const m = /^Apikey\s+(.+)$/i.exec(header.trim());
  return !!m && safeEqual(m[1], key);
}

/**
 * SePay's HMAC-SHA256 option (developer.sepay.vn, "Xác thực" / "Bảo mật" pages): `X-SePay-Timestamp` carries the
 * Unix seconds of the send, `X-SePay-Signature` is `sha256=<hex>` (the prefix optional here) of
 * HMAC-SHA256(secret, "<timestamp>.<raw body>"); a timestamp more than `toleranceS` from now is refused (replay).
 */
export function sepaySignature(secret: string, timestamp: string, rawBody: string): string {
  return createHmac('sha256', secret).update(`${timestamp}.${rawBody}`, 'utf8').digest('hex');
}

export function sepaySigned(
  secret: string | null,
  sig: { signature?: string; timestamp?: string; rawBody?: string },
  nowMs: number,
  toleranceS: number,
): boolean {
  if (!secret || !sig.signature || !sig.timestamp || sig.rawBody === undefined) return false;
  if (!/^\d{1,12}$/.test(sig.timestamp.trim())) return false;
  if (Math.abs(nowMs / 1000 - Number(sig.timestamp)) > toleranceS) return false;
  const m = /^(?:sha256=)?([0-9a-f]{64})$/i.exec(sig.signature.trim());
  return !!m && safeEqual(m[1].toLowerCase(), sepaySignature(secret, sig.timestamp.trim(), sig.rawBody));
}

export function readSepay(body: unknown): IncomingTransfer {
  if (!body || typeof body !== 'object' || Array.isArray(body)) throw new FeedBodyError('the body must be an object');
  const b = body as Record<string, unknown>;
  const id = str(b.id, 'id');
  if (!id) throw new FeedBodyError("'id' is required");
  if (b.transferType !== 'in' && b.transferType !== 'out') throw new FeedBodyError("'transferType' must be in or out");
  const amount = wholeVnd(b.transferAmount, 'transferAmount');
  if (amount <= 0) throw new FeedBodyError("'transferAmount' must be positive");
  return {
    provider: 'sepay',
    txnId: id,
    direction: b.transferType,
    amount,
    content: [str(b.content, 'content'), str(b.description, 'description')].filter(Boolean).join(' '),
    code: str(b.code, 'code'),
    accountNumber: str(b.accountNumber, 'accountNumber'),
    reference: str(b.referenceCode, 'referenceCode'),
    transactedAt: vnTime(b.transactionDate),
  };
}

// ---- Casso (webhook v2)

/** Objects' keys sorted at every level, as Casso signs them. */
export function sortedKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortedKeys);
  if (v && typeof v === 'object')
    return Object.fromEntries(
      Object.keys(v as object)
        .sort()
        .map((k) => [k, sortedKeys((v as Record<string, unknown>)[k])]),
    );
  return v;
}

export function cassoSignature(secret: string, timestamp: string, body: unknown): string {
  return createHmac('sha512', secret)
    .update(`${timestamp}.${JSON.stringify(sortedKeys(body))}`, 'utf8')
    .digest('hex');
}

export function cassoAuthorized(secret: string | null, header: string | undefined, body: unknown): boolean {
  if (!secret || !header) return false;
  const m = /^t=(\d+),v1=([0-9a-f]+)$/i.exec(header.trim());
  return !!m && safeEqual(m[2].toLowerCase(), cassoSignature(secret, m[1], body));
}

/** Casso v2 posts one transaction as `data`; its amount is negative for money out. */
export function readCasso(body: unknown): IncomingTransfer[] {
  if (!body || typeof body !== 'object' || Array.isArray(body)) throw new FeedBodyError('the body must be an object');
  const data = (body as Record<string, unknown>).data;
  const items = Array.isArray(data) ? data : [data];
  return items.map((d) => {
    if (!d || typeof d !== 'object') throw new FeedBodyError("'data' must be a transaction object");
    const t = d as Record<string, unknown>;
    const id = str(t.id, 'data.id');
    if (!id) throw new FeedBodyError("'data.id' is required");
    const amount = wholeVnd(t.amount, 'data.amount');
    if (amount === 0) throw new FeedBodyError("'data.amount' must not be 0");
    return {
      provider: 'casso' as const,
      txnId: id,
      direction: amount > 0 ? ('in' as const) : ('out' as const),
      amount: Math.abs(amount),
      content: str(t.description, 'data.description') ?? '',
      code: null,
      accountNumber: str(t.accountNumber, 'data.accountNumber'),
      reference: str(t.reference, 'data.reference'),
      transactedAt: vnTime(t.transactionDateTime),
    };
  });
}
