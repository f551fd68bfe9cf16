/**
 * The exact response cache, a room of its own: the rest of the gateway imports only this file. docs/cache.md tells
 * what is cached, under which key, what a hit costs and how it is turned on. The room holds the store (keys, entries,
 * Redis or Postgres, settings, stats, purges) and the serving of an operation's call through it (serve.ts: a hit
 * replayed and billed, a miss recorded): above the model call it wraps, below the operations that use it.
 */
export { throughCache, ENTRY_KEY_HEADER, type Cacheable, type CachingDeps } from './serve';
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
/** Who changed the cache's settings (the audit log's actor). */
export type { AuditActor as CacheAuditActor } from '../db';
