import Router from '@koa/router';
import type { AppDeps } from '../../operations';
import { authenticate, jsonBody, requireApiKey, route, type GatewayState } from '../middleware';
import type { Ctx } from '../requestState';
import { ApiError } from '../../errors';
import { ADMIN_KEY_PREFIX } from '../../auth';
import {
  purgeEntry,
  purgeModel,
  purgeProject,
  setKeyCache,
  setProjectCache,
  settingsView,
  statsReport,
  updateSettings,
} from '../../cache';

/**
 * The account's response cache (src/cache/, docs/cache.md), with any of its API keys: its settings and each key's
 * switch, its hits, misses and VND saved. Purges (one entry, all of a model or of a project) take the organization's
 * admin key (an owner's): a project key is a 403 (issue 49 point 4; the console purges too).
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
  /** The organization of the admin key that asks to purge; 401 without a valid key, 403 for any other. */
  async function purger(ctx: Ctx): Promise<string> {
    const key = /^Bearer\s+(\S+)\s*$/i.exec(ctx.get('authorization'))?.[1] ?? '';
    const admin = key.startsWith(ADMIN_KEY_PREFIX) ? await deps.adminKeys.resolve(key) : null;
    if (admin?.role === 'owner') return admin.accountId;
    if (!admin) await authenticate(ctx, deps.keys); // a missing, unknown or expired key: its 401
    throw new ApiError(
      403,
      admin
        ? "A reader's admin key changes nothing: purging the response cache takes an owner's admin key."
        : "Purging the response cache takes the organization's admin key (or the console), not a project API key.",
      'invalid_request_error',
      null,
      'admin_key_required',
    );
  }
  r.delete('/v1/cache/entries/:key', route('/v1/cache/entries/:key'), async (ctx) => {
    ctx.body = await purgeEntry(deps.cache, await purger(ctx), ctx.params.key);
  });
  r.delete('/v1/cache/entries', route('/v1/cache/entries'), async (ctx) => {
    const accountId = await purger(ctx);
    ctx.body =
      ctx.query.project_id !== undefined
        ? await purgeProject(deps.cache, deps.db, accountId, ctx.query.project_id)
        : await purgeModel(deps.cache, accountId, ctx.query.model);
  });
  r.get('/v1/cache/stats', route('/v1/cache/stats'), auth, async (ctx) => {
    ctx.body = await statsReport(deps.cache, account(ctx), ctx.query.days);
  });
  return r;
}
