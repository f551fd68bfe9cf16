import type { Ctx } from '../requestState';
import { ApiError } from '../../errors';
import type { Storage } from '../../storage';
import { parseRange } from '../../storage';
import { clip } from '../../text';

/**
 * A file from our storage as an HTTP answer (GET /v1/videos/{id}/content, the console's media): ETag and
 * If-None-Match, one `bytes=` range (If-Range honoured), HEAD, and the body streamed from storage.
 */

export interface StoredMedia {
  key: string;
  size: number;
  etag: string | null;
  type: string;
  name: string;
}

export interface MediaAnswer {
  /** `attachment` asks the browser to save the file rather than show it. */
  disposition?: 'inline' | 'attachment';
  cacheControl?: string;
}

export async function sendStoredMedia(
  ctx: Ctx,
  storage: Storage,
  media: StoredMedia,
  answer: MediaAnswer = {},
): Promise<void> {
  const size = media.size;
  ctx.set('accept-ranges', 'bytes');
  ctx.set('cache-control', answer.cacheControl ?? 'private, max-age=3600');
  ctx.set('content-disposition', `${answer.disposition ?? 'inline'}; filename="${media.name}"`);
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
      throw new ApiError(
        416,
        `Range ${clip(rangeHeader)} is not satisfiable for ${size} bytes.`,
        'invalid_request_error',
        'Range',
        'range_not_satisfiable',
        { 'content-range': `bytes */${size}` },
      );
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
