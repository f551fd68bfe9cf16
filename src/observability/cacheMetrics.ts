import client from 'prom-client';

/**
 * The response cache's metrics (src/cache/): lookups by operation and result (hit, miss, bypass, error), VND the
 * hits saved and entries written. Per operation, not per account: per-account figures are in cache_stats (the
 * console's chart, GET /v1/cache/stats), which keeps the series count bounded. Per project too, with the label's
 * values bounded: each API process gives the first CACHE_METRICS_MAX_PROJECTS projects it sees a series of their
 * own and counts the rest under `other` (a key of no project: `none`); src/cache/projectLabels.ts.
 */
export function registerCacheMetrics(registry: client.Registry) {
  return {
    lookups: new client.Counter({
      name: 'gateway_cache_lookups_total',
      help: 'Response cache lookups by operation and result (hit, miss, bypass, error)',
      labelNames: ['operation', 'result'] as const,
      registers: [registry],
    }),
    savedVnd: new client.Counter({
      name: 'gateway_cache_saved_vnd_total',
      help: 'VND the response cache hits saved (the cost of the answers they replayed, less the hit price)',
      labelNames: ['operation'] as const,
      registers: [registry],
    }),
    projectLookups: new client.Counter({
      name: 'gateway_cache_project_lookups_total',
      help: 'Response cache hits and misses by project (the first CACHE_METRICS_MAX_PROJECTS; the rest: other)',
      labelNames: ['project', 'result'] as const,
      registers: [registry],
    }),
    projectSavedVnd: new client.Counter({
      name: 'gateway_cache_project_saved_vnd_total',
      help: 'VND the response cache hits saved, by project (the first CACHE_METRICS_MAX_PROJECTS; the rest: other)',
      labelNames: ['project'] as const,
      registers: [registry],
    }),
    stores: new client.Counter({
      name: 'gateway_cache_stores_total',
      help: 'Answers offered to the response cache by outcome (stored, too_large, incomplete, error)',
      labelNames: ['outcome'] as const,
      registers: [registry],
    }),
  };
}

export type CacheMetrics = ReturnType<typeof registerCacheMetrics>;
