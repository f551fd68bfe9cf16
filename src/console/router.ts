import Router from '@koa/router';
import type { AppDeps } from '../operations';
import { route, type Ctx, type GatewayState } from '../api/middleware';
import { notFound } from '../errors';
import { CONSOLE_CSP, loadAssets } from './static';
import { mountSessionApi } from './sessionApi';
import { mountCustomerApi } from './customerApi';
import { mountOperatorApi } from './operatorApi';
import { mountReconciliationApi } from './reconciliation';
import { mountMedia } from './media';
import { mountWebhooksApi } from './webhooks';
import { mountBatchesApi } from './batches';
import { mountResponsesApi } from './responses';
import { mountTopupsApi } from './topups';
import { mountCacheApi } from './cache';

/**
 * The web console, served by the gateway itself under /console: a small hand-written single-page app
 * (src/console/static/, no build step, no CDN) over a JSON API at /console/api/* that uses a session cookie and
 * never an API key.
 */
export function consoleRouter(deps: AppDeps): Router<GatewayState> {
  const r = new Router<GatewayState>();
  const assets = loadAssets();
  const index = assets.get('index.html');
  if (!index) throw new Error('console: src/console/static/index.html is missing');

  r.use(async (ctx, next) => {
    if (ctx.path === '/console' || ctx.path.startsWith('/console/')) {
      ctx.set('content-security-policy', CONSOLE_CSP);
      ctx.set('x-content-type-options', 'nosniff');
      ctx.set('referrer-policy', 'same-origin');
      ctx.set('x-frame-options', 'DENY');
    }
    await next();
  });

  mountSessionApi(r, deps);
  mountCustomerApi(r, deps);
  mountOperatorApi(r, deps);
  mountReconciliationApi(r, deps);
  mountMedia(r, deps);
  mountWebhooksApi(r, deps);
  mountBatchesApi(r, deps);
  mountResponsesApi(r, deps);
  mountTopupsApi(r, deps);
  mountCacheApi(r, deps);

  r.get('/console/static/:file', route('/console/static/:file'), (ctx) => {
    const a = assets.get(ctx.params.file);
    if (!a) throw notFound('No such file.');
    ctx.set('etag', a.etag);
    // Revalidate every load (a 304 is cheap): a new deploy is picked up at once without versioned names.
    ctx.set('cache-control', 'no-cache');
    ctx.type = a.type;
    ctx.status = 200; // ctx.fresh only compares validators on a 2xx
    if (ctx.fresh) {
      ctx.status = 304;
      return;
    }
    ctx.body = a.body;
  });

  // Every other /console path is a page of the single-page app: the same shell, routed in the browser.
  const shell = (ctx: Ctx) => {
    ctx.set('etag', index.etag);
    ctx.set('cache-control', 'no-cache');
    ctx.type = index.type;
    ctx.status = 200;
    if (ctx.fresh) {
      ctx.status = 304;
      return;
    }
    ctx.body = index.body;
  };
  r.get('/', route('/'), (ctx) => ctx.redirect('/console/'));
  r.get('/console', route('/console'), (ctx, next) => (ctx.path === '/console' ? ctx.redirect('/console/') : next()));
  r.get(/^\/console\/(?!api\/|api$|static\/|media\/).*/, route('/console/*'), shell);
  return r;
}
