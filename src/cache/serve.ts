import type { ModelConfig } from '../catalog';
import type { Caller, OperationDeps } from '../modelCall';
import { openCall } from '../modelCall';
import { CACHE_HEADER, parseDirective, type CacheDirective } from './directive';
import type { CacheEntry, NewEntry } from './entry';
import { requestKey } from './requestKey';
import { Recorder } from './recorder';
import { replay } from './replay';
import type { ResponseCache } from './responseCache';
import type { AccountCacheSettings, CacheScope } from './accountSettings';

/**
 * An operation through the response cache. Only requests paid from the account are cached (a batch's or a
 * background response's never: their caller holds funds of its own). The cache is used when the key (else its
 * account) has it on, or the request asks with `x-gateway-cache: ttl=N`; a key switched off is off whatever the
 * request says; `no-store` bypasses it; a request with tools is cached only when it asks.
 *
 * A hit answers with no upstream call: it is admitted by the key's rate limits as a request, charged the hit price
 * through the ledger like any request (so budgets count it), and its usage record says `cache_hit` and the VND it
 * saved. A miss runs the operation with its answer recorded on the way out, and stores it once the request has
 * settled complete (status 200: a stream cut short or left by its client is never stored).
 */

export interface Cacheable {
  /** The operation billed (chat.completions, completions, embeddings, messages, responses). */
  operation: string;
  model: ModelConfig;
  body: Record<string, unknown>;
  /** What besides the body changes the answer (the Anthropic version and beta). */
  extra?: Record<string, unknown>;
}

export const ENTRY_KEY_HEADER = 'x-gateway-cache-key';

/**
 * The operations' deps as the cache reads them: AppDeps has `cache` (src/operations/deps.ts); absent or null: off.
 * The model call's OperationDeps does not name it, so the model call, below the cache, does not import it.
 */
export type CachingDeps = OperationDeps & { cache?: ResponseCache | null };

export function throughCache(
  caller: Caller,
  deps: CachingDeps,
  req: Cacheable,
  run: (caller: Caller) => Promise<void>,
): Promise<void> {
  const cache = deps.cache;
  if (!cache || caller.billing.kind !== 'account') return run(caller);
  const directive = parseDirective(caller.cacheDirective, cache.config.maxTtlSeconds);
  const planned = planFor(cache, caller, req, directive);
  // Most requests: the account's settings in memory and the cache off, straight to the operation (no await).
  if (!(planned instanceof Promise)) return withPlan(cache, caller, deps, req, run, planned, directive);
  return planned.then((plan) => withPlan(cache, caller, deps, req, run, plan, directive));
}

function withPlan(
  cache: ResponseCache,
  caller: Caller,
  deps: CachingDeps,
  req: Cacheable,
  run: (caller: Caller) => Promise<void>,
  plan: Plan | null,
  directive: CacheDirective,
): Promise<void> {
  // An Output that cannot copy its answer (Output.tap: every HTTP request's can) is not cached.
  if (plan && caller.out.tap) return cached(cache, caller, deps, req, run, plan, directive);
  if (directive.noStore) caller.out.setHeader(CACHE_HEADER, 'bypass');
  return run(caller);
}

async function cached(
  cache: ResponseCache,
  caller: Caller,
  deps: CachingDeps,
  req: Cacheable,
  run: (caller: Caller) => Promise<void>,
  plan: Plan,
  directive: CacheDirective,
): Promise<void> {
  const p = caller.principal;
  const key = requestKey({
    scope: plan.scope,
    operation: req.operation,
    model: req.model.id,
    body: req.body,
    extra: req.extra,
  });
  if (!directive.refresh) {
    const got = cache.lookup(key);
    // Awaited only when the store had to ask its storage (a miss on a key it does not know is answered at once).
    const entry = got instanceof Promise ? await got : got;
    if (entry && entry !== 'error') return serveHit(cache, caller, deps, req, key, entry);
    if (entry === 'error') cache.countError(req.operation);
  }
  cache.countMiss(req.operation, p.accountId, p.projectId);
  caller.out.setHeader(CACHE_HEADER, 'miss');
  caller.out.setHeader(ENTRY_KEY_HEADER, key);
  const rec = new Recorder(cache.config.maxEntryBytes);
  caller.out.tap!(rec);
  await run(caller);
  const meter = caller.call?.meter;
  if (!meter || meter.status !== 200 || !rec.kind || caller.abort.aborted) {
    cache.countStore('incomplete');
    return;
  }
  if (rec.tooLarge) {
    cache.countStore('too_large');
    return;
  }
  const entry: NewEntry = {
    key,
    kind: rec.kind,
    type: rec.type,
    body: rec.body(),
    model: meter.model,
    costVnd: meter.charged,
    createdAt: Date.now(),
  };
  // Off the response path: the answer has gone (or is going) to the client already.
  cache.save(
    key,
    { accountId: p.accountId, model: req.model.id, projectId: p.projectId ?? null },
    entry,
    plan.ttlSeconds,
  );
}

interface Plan {
  scope: string;
  ttlSeconds: number;
}

/** Whether and how this request uses the cache; null: not at all. At once when the settings are in memory. */
function planFor(
  cache: ResponseCache,
  caller: Caller,
  req: Cacheable,
  d: CacheDirective,
): Plan | null | Promise<Plan | null> {
  if (d.noStore) return null;
  const s = cache.settings.forAccount(caller.principal.accountId);
  if (!(s instanceof Promise)) return planWith(s, caller, req, d);
  return s.then(
    (settings) => planWith(settings, caller, req, d),
    () => null, // the settings cannot be read: no cache, never an error
  );
}

function planWith(s: AccountCacheSettings, caller: Caller, req: Cacheable, d: CacheDirective): Plan | null {
  const p = caller.principal;
  const keyOwn = s.keys.get(p.keyId) ?? (p.projectId ? s.projects.get(p.projectId) : undefined);
  if (keyOwn === false) return null;
  if (!(keyOwn ?? s.enabled) && !d.asked) return null;
  if (hasTools(req.body) && !d.asked) return null;
  return {
    scope: scopeKey(s.scope, p),
    ttlSeconds: d.ttlSeconds ?? s.defaultTtlSeconds,
  };
}

/** Whose entries a request shares: the account's, its key's project's (a key of no project: its own), or its key's. */
function scopeKey(scope: CacheScope, p: { accountId: string; keyId: string; projectId?: string }): string {
  if (scope === 'project' && p.projectId) return `p:${p.accountId}:${p.projectId}`;
  return scope === 'account' ? `a:${p.accountId}` : `k:${p.accountId}:${p.keyId}`;
}

function hasTools(body: Record<string, unknown>): boolean {
  const t = body.tools ?? body.functions;
  return Array.isArray(t) && t.length > 0;
}

async function serveHit(
  cache: ResponseCache,
  caller: Caller,
  deps: OperationDeps,
  req: Cacheable,
  key: string,
  entry: CacheEntry,
): Promise<void> {
  const price = cache.hitPriceVnd;
  // Admitted (a request for the key's rate limit; no tokens) and reserved like any request: 429 and 402 here.
  const call = await openCall(caller, deps, req.model, req.operation, { maxCost: price });
  const saved = Math.max(0, entry.costVnd - price);
  call.settleCost(price, { cache_hit: 1, saved_vnd: saved }, 200, cache.hitPricing);
  cache.countHit(req.operation, caller.principal.accountId, caller.principal.projectId, saved);
  const out = caller.out;
  out.setHeader(CACHE_HEADER, 'hit');
  out.setHeader('age', String(Math.max(0, Math.floor((Date.now() - entry.createdAt) / 1000))));
  out.setHeader(ENTRY_KEY_HEADER, key);
  call.setCostHeaders();
  await replay(entry, out, call.costComment());
}
