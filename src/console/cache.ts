import type Router from '@koa/router';
import type { AppDeps } from '../operations';
import { jsonBody, route, type GatewayState } from '../api/middleware';
import {
  purgeEntry,
  purgeModel,
  purgeProject,
  setKeyCache,
  setProjectCache,
  settingsView,
  statsReport,
  updateSettings,
} from '../cache';
import { requireCsrf, requireSession, sameOrigin, sessionOf } from './auth';

/**
 * The signed-in account's response cache (docs/cache.md): its settings and keys' switches, its stats (hits, misses,
 * VND saved per day: the page's chart) and purges. The same functions as /v1/cache/* (src/cache/manage.ts).
 */
export function mountCacheApi(r: Router<GatewayState>, deps: AppDeps): void {
  const auth = [sameOrigin(deps), requireSession(deps), requireCsrf()];
  const body = jsonBody(16 * 1024);
  const account = (ctx: Parameters<typeof sessionOf>[0]) => sessionOf(ctx).accountId;

  r.get('/console/api/cache', route('/console/api/cache'), ...auth, async (ctx) => {
    const [settings, stats] = await Promise.all([
      settingsView(deps.cache, deps.db, account(ctx)),
      statsReport(deps.cache, account(ctx), ctx.query.days),
    ]);
    ctx.body = { settings, stats };
  });
  r.patch('/console/api/cache/settings', route('/console/api/cache/settings'), ...auth, body, async (ctx) => {
    ctx.body = await updateSettings(deps.cache, deps.db, account(ctx), ctx.request.body as object);
  });
  r.put('/console/api/cache/keys/:id', route('/console/api/cache/keys/:id'), ...auth, body, async (ctx) => {
    await setKeyCache(deps.cache, account(ctx), ctx.params.id, ctx.request.body as { enabled?: unknown });
    ctx.body = await settingsView(deps.cache, deps.db, account(ctx));
  });
  r.put('/console/api/cache/projects/:id', route('/console/api/cache/projects/:id'), ...auth, body, async (ctx) => {
    await setProjectCache(deps.cache, account(ctx), ctx.params.id, ctx.request.body as { enabled?: unknown });
    ctx.body = await settingsView(deps.cache, deps.db, account(ctx));
  });
  r.delete('/console/api/cache/entries/:key', route('/console/api/cache/entries/:key'), ...auth, async (ctx) => {
    ctx.body = await purgeEntry(deps.cache, account(ctx), ctx.params.key);
  });
  r.delete('/console/api/cache/entries', route('/console/api/cache/entries'), ...auth, async (ctx) => {
    ctx.body =
      ctx.query.project_id !== undefined
        ? await purgeProject(deps.cache, deps.db, account(ctx), ctx.query.project_id)
        : await purgeModel(deps.cache, account(ctx), ctx.query.model);
  });
}
