/**
 * The exact response cache, a room of its own: the rest of the gateway imports only this file.
 * docs/cache.md tells what is cached, under which key, what a hit costs and how it is turned on. Serving a call
 * through it (a hit replayed, a miss recorded) is the operations' (src/operations/cache/), above the model call.
 */
export { CACHE_HEADER, parseDirective, type CacheDirective } from './directive';
export { ResponseCache, createResponseCache, type CacheDeps } from './responseCache';
export { requestKey, keyedBody, canonicalJson } from './requestKey';
export { SCOPES, type CacheScope, type AccountCacheSettings } from './accountSettings';
export type { CacheStatsReport } from './stats';
export {
  settingsView,
  updateSettings,
  setKeyCache,
  setProjectCache,
  purgeEntry,
  purgeModel,
  purgeProject,
  statsReport,
} from './manage';
export { PgCacheStore } from './pgStore';

export { COST_SLOT, makeEntry } from './entry';
export type { CacheEntry, EntryKind } from './entry';
