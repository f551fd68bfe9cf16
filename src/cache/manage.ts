import type { Db } from '../db';
import { badRequest, notFound } from '../errors';
import type { ResponseCache } from './responseCache';
import type { CacheStatsReport } from './stats';
import type { SettingsPatch } from './accountSettings';

/**
 * What an account manages of its cache, in one place for the API (/v1/cache/*) and the console: its settings and
 * its keys' switches, purges of its own entries, its stats. Every call names the account and touches only its rows
 * and entries: another account's key or entry is a 404.
 */

export interface CacheSettingsView {
  object: 'cache.settings';
  enabled: boolean;
  default_ttl_seconds: number;
  scope: string;
  hit_price_vnd: number;
  max_ttl_seconds: number;
  storage: string;
  keys: { id: string; name: string; project_id: string | null; enabled: boolean | null; effective: boolean }[];
  projects: { id: string; name: string; enabled: boolean | null; effective: boolean }[];
}

type MaybeCache = ResponseCache | null | undefined;

/** The cache, or a 400 when this gateway runs without one. */
function on(cache: MaybeCache): ResponseCache {
  if (!cache)
    throw badRequest('the response cache is turned off on this gateway (CACHE_ENABLED=false)', null, 'cache_disabled');
  return cache;
}

export async function settingsView(maybe: MaybeCache, db: Db, accountId: string): Promise<CacheSettingsView> {
  const cache = on(maybe);
  const [s, keys, projects] = await Promise.all([
    cache.settings.read(accountId),
    db.query(
      'SELECT id, name, project_id FROM api_keys WHERE account_id = $1 AND revoked_at IS NULL ORDER BY created_at',
      [accountId],
    ),
    db.query('SELECT id, name FROM projects WHERE account_id = $1 AND archived_at IS NULL ORDER BY created_at, id', [
      accountId,
    ]),
  ]);
  const projectOn = (id: string | null) => (id === null ? undefined : s.projects.get(id));
  return {
    object: 'cache.settings',
    enabled: s.enabled,
    default_ttl_seconds: s.defaultTtlSeconds,
    scope: s.scope,
    hit_price_vnd: cache.hitPriceVnd,
    max_ttl_seconds: cache.config.maxTtlSeconds,
    storage: cache.store.name,
    keys: keys.rows.map((k) => {
      const own = s.keys.get(k.id);
      const effective = own ?? projectOn(k.project_id) ?? s.enabled;
      return { id: k.id, name: k.name, project_id: k.project_id, enabled: own ?? null, effective };
    }),
    projects: projects.rows.map((p) => {
      const own = s.projects.get(p.id);
      return { id: p.id, name: p.name, enabled: own ?? null, effective: own ?? s.enabled };
    }),
  };
}

export async function updateSettings(
  maybe: MaybeCache,
  db: Db,
  accountId: string,
  patch: SettingsPatch,
): Promise<CacheSettingsView> {
  const cache = on(maybe);
  await cache.settings.update(accountId, patch);
  return settingsView(cache, db, accountId);
}

export function setKeyCache(maybe: MaybeCache, accountId: string, keyId: string, body: unknown): Promise<void> {
  return on(maybe).settings.setKey(accountId, keyId, enabledOf(body));
}

/** A project's own switch (true, false, or null: the account's), over the account's and under its keys' own. */
export function setProjectCache(maybe: MaybeCache, accountId: string, projectId: string, body: unknown) {
  return on(maybe).settings.setProject(accountId, projectId, enabledOf(body));
}

function enabledOf(body: unknown): unknown {
  if (!body || typeof body !== 'object' || !('enabled' in body))
    throw badRequest('enabled is required (true, false or null)', 'enabled');
  return body.enabled;
}

/** Deletes one of the account's entries by its key (the x-gateway-cache-key header of the answer). */
export async function purgeEntry(
  maybe: MaybeCache,
  accountId: string,
  key: string,
): Promise<{ object: 'cache.entry'; id: string; deleted: true }> {
  const cache = on(maybe);
  if (!/^[0-9a-f]{64}$/.test(key) || !(await cache.delete(key, accountId))) throw notFound('cache entry not found');
  return { object: 'cache.entry', id: key, deleted: true };
}

/** Deletes all of the account's entries of one model. */
export async function purgeModel(
  maybe: MaybeCache,
  accountId: string,
  model: unknown,
): Promise<{ object: 'cache.purge'; model: string; deleted: number }> {
  const cache = on(maybe);
  if (typeof model !== 'string' || !model || model.length > 200)
    throw badRequest('model is required: the model whose entries to delete', 'model');
  return { object: 'cache.purge', model, deleted: await cache.purgeModel(accountId, model) };
}

/** Deletes all of the account's entries stored by keys of one of its projects (another's: a 404). */
export async function purgeProject(
  maybe: MaybeCache,
  db: Db,
  accountId: string,
  projectId: unknown,
): Promise<{ object: 'cache.purge'; project_id: string; deleted: number }> {
  const cache = on(maybe);
  if (typeof projectId !== 'string' || !/^proj_[0-9a-z]{1,64}$/i.test(projectId))
    throw badRequest('project_id must be a project id (proj_...)', 'project_id');
  const owns = await db.query('SELECT 1 FROM projects WHERE id = $1 AND account_id = $2', [projectId, accountId]);
  if (!owns.rowCount) throw notFound('project not found');
  return { object: 'cache.purge', project_id: projectId, deleted: await cache.purgeProject(accountId, projectId) };
}

export async function statsReport(
  maybe: MaybeCache,
  accountId: string,
  daysParam: unknown,
): Promise<CacheStatsReport & { object: 'cache.stats' }> {
  const cache = on(maybe);
  const days = daysParam === undefined ? 30 : Number(daysParam);
  if (!Number.isInteger(days) || days < 1 || days > 366)
    throw badRequest('days must be an integer from 1 to 366', 'days');
  return { object: 'cache.stats', ...(await cache.stats.report(accountId, days)) };
}
