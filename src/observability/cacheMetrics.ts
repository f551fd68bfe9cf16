import client from 'prom-client';

/** A counter's series as the request path counts it: a number added to, handed to prom-client at each scrape. */
export interface Tally {
  inc(n?: number): void;
}

/**
 * A prom-client counter whose series are counted in plain numbers and added to the counter when it is collected.
 * Counting through prom-client hashes the series' labels on every increment (a bound child too), which on a cache
 * miss cost more, in a busy process, than the rest of the miss's counting together.
 */
class TalliedCounter<L extends string> {
  readonly counter: client.Counter<L>;
  private readonly tallies = new Map<string, { labels: Record<L, string>; n: number }>();
  private readonly names: readonly L[];

  constructor(config: client.CounterConfiguration<L> & { labelNames: readonly L[] }) {
    this.names = config.labelNames;
    const tallies = this.tallies;
    this.counter = new client.Counter<L>({
      ...config,
      collect() {
        for (const t of tallies.values())
          if (t.n > 0) {
            this.inc(t.labels, t.n);
            t.n = 0;
          }
      },
    });
  }

  /** The series of these label values (kept: callers hold it, so label sets must be bounded). */
  labels(...values: string[]): Tally {
    const id = values.join('\u0000');
    let t = this.tallies.get(id);
    if (!t) {
      const labels = Object.fromEntries(this.names.map((n, i) => [n, values[i]])) as Record<L, string>;
      this.tallies.set(id, (t = { labels, n: 0 }));
    }
    const series = t;
    return {
      inc(n = 1) {
        series.n += n;
      },
    };
  }
}

/**
 * The response cache's metrics (src/cache/): lookups by operation and result (hit, miss, bypass, error), VND the
 * hits saved and entries written. Per operation, not per account: per-account figures are in cache_stats (the
 * console's chart, GET /v1/cache/stats), which keeps the series count bounded. Per project too, with the label's
 * values bounded: each API process gives the first CACHE_METRICS_MAX_PROJECTS projects it sees a series of their
 * own and counts the rest under `other` (a key of no project: `none`); src/cache/projectLabels.ts.
 */
export function registerCacheMetrics(registry: client.Registry) {
  return {
    lookups: new TalliedCounter({
      name: 'gateway_cache_lookups_total',
      help: 'Response cache lookups by operation and result (hit, miss, bypass, error)',
      labelNames: ['operation', 'result'] as const,
      registers: [registry],
    }),
    savedVnd: new TalliedCounter({
      name: 'gateway_cache_saved_vnd_total',
      help: 'VND the response cache hits saved (the cost of the answers they replayed, less the hit price)',
      labelNames: ['operation'] as const,
      registers: [registry],
    }),
    projectLookups: new TalliedCounter({
      name: 'gateway_cache_project_lookups_total',
      help: 'Response cache hits and misses by project (the first CACHE_METRICS_MAX_PROJECTS; the rest: other)',
      labelNames: ['project', 'result'] as const,
      registers: [registry],
    }),
    projectSavedVnd: new TalliedCounter({
      name: 'gateway_cache_project_saved_vnd_total',
      help: 'VND the response cache hits saved, by project (the first CACHE_METRICS_MAX_PROJECTS; the rest: other)',
      labelNames: ['project'] as const,
      registers: [registry],
    }),
    stores: new TalliedCounter({
      name: 'gateway_cache_stores_total',
      help: 'Answers offered to the response cache by outcome (stored, too_large, incomplete, error)',
      labelNames: ['outcome'] as const,
      registers: [registry],
    }),
  };
}

export type CacheMetrics = ReturnType<typeof registerCacheMetrics>;
