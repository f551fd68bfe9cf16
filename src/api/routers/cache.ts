import Router from '@koa/router';
import type { AppDeps } from '../../operations/deps';
import { jsonBody, requireApiKey, route, type GatewayState } from '../middleware';
import {
  purgeEntry,
  purgeModel,
  setKeyCache,
  setProjectCache,
  settingsView,
  statsReport,
  updateSettings,
} from '../../cache';

/**
 * The account's response cache (src/cache/, docs/cache.md), with any of its API keys: its settings and each key's
 * switch, purges of its entries (one, or all of a model), its hits, misses and VND saved.
 */
export function cacheRouter(deps: AppDeps): Router<GatewayState> {
  const r = new Router<GatewayState>();
  const auth = requireApiKey(deps);
  const body = jsonBody(deps.config.maxJsonBytes);
  const account = (ctx: { state: GatewayState }) => ctx.state.principal!.accountId;

  r.get('/v1/cache/settings', route('/v1/cache/settings'), auth, async (ctx) => {
    ctx.body = await settingsView(deps.cache, deps.db, account(ctx));
  });
  r.patch('/v1/cache/settings', route('/v1/cache/settings'), auth, body, async (ctx) => {
    ctx.body = await updateSettings(deps.cache, deps.db, account(ctx), ctx.request.body as object);
  });
  r.put('/v1/cache/keys/:keyId', route('/v1/cache/keys/:keyId'), auth, body, async (ctx) => {
    await setKeyCache(deps.cache, account(ctx), ctx.params.keyId, ctx.request.body as { enabled?: unknown });
    ctx.body = await settingsView(deps.cache, deps.db, account(ctx));
  });
  r.put('/v1/cache/projects/:projectId', route('/v1/cache/projects/:projectId'), auth, body, async (ctx) => {
    await setProjectCache(deps.cache, account(ctx), ctx.params.projectId, ctx.request.body as { enabled?: unknown });
    ctx.body = await settingsView(deps.cache, deps.db, account(ctx));
  });
  r.delete('/v1/cache/entries/:key', route('/v1/cache/entries/:key'), auth, async (ctx) => {
    ctx.body = await purgeEntry(deps.cache, account(ctx), ctx.params.key);
  });
  r.delete('/v1/cache/entries', route('/v1/cache/entries'), auth, async (ctx) => {
    ctx.body = await purgeModel(deps.cache, account(ctx), ctx.query.model);
  });
  r.get('/v1/cache/stats', route('/v1/cache/stats'), auth, async (ctx) => {
    ctx.body = await statsReport(deps.cache, account(ctx), ctx.query.days);
  });
  return r;
}
