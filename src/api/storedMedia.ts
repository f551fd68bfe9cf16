import type { Ctx } from './middleware';
import type { Storage } from '../storage/storage';

/**
 * A file from our storage as an HTTP answer (GET /v1/videos/{id}/content): ETag and If-None-Match, one `bytes=`
 * range (If-Range honoured), HEAD, and the body streamed from storage.
 */

export interface StoredMedia { key: string; size: number; etag: string | null; type: string; name: string }

export async function sendStoredMedia(ctx: Ctx, storage: Storage, media: StoredMedia): Promise<void> {
  const size = media.size;
  ctx.set('accept-ranges', 'bytes');
  ctx.set('cache-control', 'private, max-age=3600');
  ctx.set('content-disposition', `inline; filename="${media.name}"`);
  if (media.etag) ctx.set('etag', media.etag);
  ctx.type = media.type;
  if (media.etag && etagMatches(ctx.get('if-none-match'), media.etag)) {
    ctx.status = 304;
    return;
  }
  let range: { start: number; end: number } | null = null;
  const rangeHeader = ctx.get('range');
  const ifRange = ctx.get('if-range');
  if (rangeHeader && (!ifRange || (media.etag !== null && ifRange === media.etag))) {
    const parsed = parseRange(rangeHeader, size);
    if (parsed === 'unsatisfiable') {
      ctx.status = 416;
      ctx.set('content-range', `bytes */${size}`);
      ctx.body = { error: { message: `Range ${rangeHeader} is not satisfiable for ${size} bytes.`, type: 'invalid_request_error', param: 'Range', code: 'range_not_satisfiable' } };
      return;
    }
    range = parsed;
  }
  if (ctx.method === 'HEAD') {
    ctx.status = range ? 206 : 200;
    if (range) ctx.set('content-range', `bytes ${range.start}-${range.end}/${size}`);
    ctx.length = range ? range.end - range.start + 1 : size;
    return;
  }
  const stream = await storage.get(media.key, range ?? undefined);
  if (range) {
    ctx.status = 206;
    ctx.set('content-range', `bytes ${range.start}-${range.end}/${size}`);
    ctx.length = range.end - range.start + 1;
  } else {
    ctx.status = 200;
    ctx.length = size;
  }
  ctx.body = stream;
}

function etagMatches(header: string, etag: string): boolean {
  if (!header) return false;
  if (header.trim() === '*') return true;
  const weak = (s: string) => s.trim().replace(/^W\//, '');
  return header.split(',').some((t) => weak(t) === weak(etag));
}

/** One `bytes=` range (first-last, first-, -suffix); several ranges or a malformed header serve the whole file. */
function parseRange(header: string, size: number): { start: number; end: number } | 'unsatisfiable' | null {
  const m = /^bytes=\s*(\d*)\s*-\s*(\d*)\s*$/.exec(header.trim());
  if (!m || (m[1] === '' && m[2] === '')) return null;
  let start: number;
  let end: number;
  if (m[1] === '') {
    const suffix = Number(m[2]);
    if (suffix === 0) return 'unsatisfiable';
    start = Math.max(0, size - suffix);
    end = size - 1;
  } else {
    start = Number(m[1]);
    end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
    if (m[2] !== '' && Number(m[2]) < start) return null;
  }
  if (start >= size || size === 0) return 'unsatisfiable';
  return { start, end };
}
