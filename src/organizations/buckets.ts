import { badRequest } from '../errors';
import { one } from './ids';

type Query = Record<string, string | string[] | undefined>;

/** Bucket widths of the usage and costs routes: seconds each, default and most buckets a page (OpenAI's). */
const WIDTHS = {
  '1m': { seconds: 60, limit: 60, max: 1440 },
  '1h': { seconds: 3600, limit: 24, max: 168 },
  '1d': { seconds: 86400, limit: 7, max: 31 },
} as const;

export interface BucketRange {
  /** The page's first bucket's start, and the end of its last one (Unix seconds; the last may end at end_time). */
  from: number;
  to: number;
  width: number;
  /** The end of the query's range (end_time, else now). */
  end: number;
  /** Where the next page starts, when the range goes on past this page. */
  next: number | null;
}

function seconds(q: Query, name: string): number | undefined {
  const v = one(q, name);
  if (v === undefined) return undefined;
  if (!/^\d{1,11}$/.test(v)) throw badRequest(`Invalid '${name}': expected Unix seconds.`, name);
  return Number(v);
}

/**
 * The page of buckets a usage or costs query asks for: start_time (required), end_time (default now), bucket_width,
 * limit (buckets a page) and page (the opaque start of the next page, as a previous answer's next_page gave it).
 */
export function bucketRange(q: Query, widths: (keyof typeof WIDTHS)[] = ['1m', '1h', '1d']): BucketRange {
  const start = seconds(q, 'start_time');
  if (start === undefined) throw badRequest("Missing required parameter: 'start_time'.", 'start_time');
  const end = seconds(q, 'end_time') ?? Math.ceil(Date.now() / 1000);
  if (end <= start) throw badRequest("Invalid 'end_time': it must be after start_time.", 'end_time');
  const w = one(q, 'bucket_width') ?? '1d';
  if (!(widths as string[]).includes(w))
    throw badRequest(`Invalid 'bucket_width': expected one of ${widths.join(', ')}.`, 'bucket_width');
  const spec = WIDTHS[w as keyof typeof WIDTHS];
  const l = one(q, 'limit');
  const limit = l === undefined ? spec.limit : Number(l);
  if (!/^\d+$/.test(l ?? '1') || limit < 1 || limit > spec.max)
    throw badRequest(`Invalid 'limit': expected 1 to ${spec.max} buckets of ${w}.`, 'limit');
  let from = start;
  const page = one(q, 'page');
  if (page !== undefined) {
    const at = /^[A-Za-z0-9_-]{1,16}$/.test(page) ? Number(Buffer.from(page, 'base64url').toString('latin1')) : NaN;
    if (!Number.isInteger(at) || at <= start || at >= end || (at - start) % spec.seconds !== 0)
      throw badRequest("Invalid 'page': not a page of this query.", 'page');
    from = at;
  }
  const to = Math.min(end, from + limit * spec.seconds);
  return { from, to, width: spec.seconds, end, next: to < end ? to : null };
}

export const pageToken = (at: number): string => Buffer.from(String(at), 'latin1').toString('base64url');

/** Every bucket of the page, in order, each with the results that fell in it (an empty bucket has none). */
export function bucketsOf<T>(r: BucketRange, results: Map<number, T[]>) {
  const data = [];
  for (let s = r.from; s < r.to; s += r.width)
    data.push({
      object: 'bucket' as const,
      start_time: s,
      end_time: Math.min(s + r.width, r.end),
      results: results.get(s) ?? [],
    });
  return {
    object: 'page' as const,
    data,
    has_more: r.next !== null,
    next_page: r.next === null ? null : pageToken(r.next),
  };
}
