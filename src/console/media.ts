import type Router from '@koa/router';
import type { AppDeps } from '../operations';
import { route, type GatewayState } from '../api/middleware';
import { sendStoredMedia } from '../api/middleware';
import { conflict, notFound } from '../errors';
import { requireSession, sessionOf } from './auth';
import { jobMedia } from './jobs';
import { uuidParam } from './params';

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
    if (media.status !== 'completed')
      throw conflict(`The job is ${media.status}; its video is available once it is completed.`, 'job_not_completed');
    if (!media.key) throw notFound('This job has no such file.');
    const head = await deps.storage.head(media.key);
    if (!head) throw notFound('The stored file is missing.');
    // Revalidated on every use (a 304 is cheap): the browser must not hand a cached private video to the next
    // person who signs in on the same machine; the session check above runs first.
    ctx.set('vary', 'Cookie');
    await sendStoredMedia(
      ctx,
      deps.storage,
      {
        key: media.key,
        size: head.size,
        etag: head.etag,
        type: media.contentType,
        name: `video-${id}${file === 'video.mp4' ? '.mp4' : ''}`,
      },
      { cacheControl: 'private, no-cache', disposition: ctx.query.download === '1' ? 'attachment' : 'inline' },
    );
  });
}
