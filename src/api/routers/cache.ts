import type Router from '@koa/router';
import type { AppDeps } from '../../operations';
import { authenticate, type Ctx, type GatewayState } from '../middleware';
import { apiRoutes } from '../route';
import { ApiError } from '../../errors';
import { ADMIN_KEY_PREFIX } from '../../auth';
import type { CacheAuditActor as AuditActor } from '../../cache';
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
  const api = apiRoutes(deps, { shape: 'openai' });
  const body = { json: deps.config.maxJsonBytes };
  const account = (ctx: { state: GatewayState }) => ctx.state.principal!.accountId;
  // The audit log names the key that changed a setting (OpenAI's api_key actor).
  const actor = (ctx: { state: GatewayState }): AuditActor => ({
    type: 'api_key',
    api_key: { id: ctx.state.principal!.keyId, type: 'user' },
  });
  const audited = (ctx: { state: GatewayState }) => ({ db: deps.db, actor: actor(ctx) });

  api.add({
    method: 'GET',
    path: '/v1/cache/settings',
    handler: async (ctx) => {
      ctx.body = await settingsView(deps.cache, deps.db, account(ctx));
    },
  });
  api.add({
    method: 'PATCH',
    path: '/v1/cache/settings',
    body,
    handler: async (ctx, patch) => {
      ctx.body = await updateSettings(deps.cache, deps.db, account(ctx), patch as object, actor(ctx));
    },
  });
  api.add({
    method: 'PUT',
    path: '/v1/cache/keys/:keyId',
    body,
    handler: async (ctx, b) => {
      await setKeyCache(deps.cache, account(ctx), ctx.params.keyId, b as { enabled?: unknown }, audited(ctx));
      ctx.body = await settingsView(deps.cache, deps.db, account(ctx));
    },
  });
  api.add({
    method: 'PUT',
    path: '/v1/cache/projects/:projectId',
    body,
    handler: async (ctx, b) => {
      await setProjectCache(deps.cache, account(ctx), ctx.params.projectId, b as { enabled?: unknown }, audited(ctx));
      ctx.body = await settingsView(deps.cache, deps.db, account(ctx));
    },
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
  // Purges: the owner's admin key, checked by purger (a project key is a 403).
  api.add({
    method: 'DELETE',
    path: '/v1/cache/entries/:key',
    auth: 'none',
    handler: async (ctx) => {
      ctx.body = await purgeEntry(deps.cache, await purger(ctx), ctx.params.key);
    },
  });
  api.add({
    method: 'DELETE',
    path: '/v1/cache/entries',
    auth: 'none',
    handler: async (ctx) => {
      const accountId = await purger(ctx);
      ctx.body =
        ctx.query.project_id !== undefined
          ? await purgeProject(deps.cache, deps.db, accountId, ctx.query.project_id)
          : await purgeModel(deps.cache, accountId, ctx.query.model);
    },
  });
  api.add({
    method: 'GET',
    path: '/v1/cache/stats',
    handler: async (ctx) => {
      ctx.body = await statsReport(deps.cache, account(ctx), ctx.query.days);
    },
  });
  return api.router;
}
