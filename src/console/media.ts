import type Router from '@koa/router';
import type { AppDeps } from '../api/deps';
import { route, type GatewayState } from '../api/middleware';
import { ApiError, conflict, notFound } from '../errors';
import { requireSession, sessionOf } from './auth';
import { jobMedia } from './jobs';
import { uuidParam } from './params';

/** Parses a single-range `Range: bytes=...` header against a size; null = whole body, 'invalid' = 416. */
export function parseRange(header: string, size: number): { start: number; end: number } | null | 'invalid' {
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === '' && m[2] === '')) return null; // unsupported forms (multi-range): send the whole body
  if (m[1] === '') {
    const n = Number(m[2]);
    if (n === 0) return 'invalid';
    return { start: Math.max(0, size - n), end: size - 1 };
  }
  const start = Number(m[1]);
  const end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
  if (start >= size || end < start) return 'invalid';
  return { start, end };
}

/**
 * Session-authenticated media of the signed-in account's video jobs, streamed from storage (the /v1 content
 * route needs an API key, which the console never holds). Range and ETag support so <video> can seek.
 */
export function mountMedia(r: Router<GatewayState>, deps: AppDeps): void {
  r.get('/console/media/jobs/:id/:file', route('/console/media/jobs/:id/:file'), requireSession(deps), async (ctx) => {
    const file = ctx.params.file;
    if (file !== 'video.mp4' && file !== 'last-frame') throw notFound('No such file.');
    const id = uuidParam(ctx.params.id, 'id');
    const media = await jobMedia(deps.db, sessionOf(ctx).accountId, id, file === 'video.mp4' ? 'video' : 'last_frame');
    if (!media) throw notFound('No such video job on this account.');
    if (media.status !== 'completed') throw conflict(`The job is ${media.status}; its video is available once it is completed.`, 'job_not_completed');
    if (!media.key) throw notFound('This job has no such file.');
    const head = await deps.storage.head(media.key);
    if (!head) throw notFound('The stored file is missing.');
    // Revalidated on every use (a 304 is cheap): the browser must not hand a cached private video to the next
    // person who signs in on the same machine; the session check above runs first.
    ctx.set('cache-control', 'private, no-cache');
    ctx.set('vary', 'Cookie');
    ctx.set('accept-ranges', 'bytes');
    ctx.set('etag', head.etag);
    ctx.type = media.contentType;
    if (ctx.query.download === '1') {
      ctx.set('content-disposition', `attachment; filename="video-${id}${file === 'video.mp4' ? '.mp4' : ''}"`);
    }
    ctx.status = 200; // ctx.fresh only compares validators on a 2xx
    if (ctx.fresh) {
      ctx.status = 304;
      return;
    }
    const rangeHeader = ctx.get('range');
    const ifRange = ctx.get('if-range');
    const range = rangeHeader && (!ifRange || ifRange === head.etag) ? parseRange(rangeHeader, head.size) : null;
    if (range === 'invalid') {
      throw new ApiError(416, 'Requested range not satisfiable.', 'invalid_request_error', null, 'range_not_satisfiable', { 'content-range': `bytes */${head.size}` });
    }
    if (ctx.method === 'HEAD') {
      ctx.length = head.size;
      ctx.status = 200;
      return;
    }
    if (range) {
      ctx.status = 206;
      ctx.set('content-range', `bytes ${range.start}-${range.end}/${head.size}`);
      ctx.body = await deps.storage.get(media.key, range);
      ctx.length = range.end - range.start + 1;
    } else {
      ctx.status = 200;
      ctx.body = await deps.storage.get(media.key);
      ctx.length = head.size;
    }
  });
}
