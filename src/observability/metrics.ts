import client from 'prom-client';
import { registerRoutingMetrics, type RoutingSource } from './routingMetrics';
import { registerCacheMetrics } from './cacheMetrics';

/** Prometheus metrics (prom-client). One registry per process; tests may create apps repeatedly. */
export class Metrics {
  readonly registry = new client.Registry();
  /** The response cache's (src/cache/). */
  readonly cache = registerCacheMetrics(this.registry);
  readonly requests = new client.Counter({
    name: 'gateway_http_requests_total',
    help: 'HTTP requests by route, method, status and model',
    labelNames: ['route', 'method', 'status', 'model'] as const,
    registers: [this.registry],
    collect: () => this.addPendingRequests(),
  });
  readonly latency = new client.Histogram({
    name: 'gateway_http_request_duration_seconds',
    help: 'Request duration until the response is fully sent (streams included), by route, status and model',
    labelNames: ['route', 'method', 'status', 'model'] as const,
    registers: [this.registry],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
  });
  readonly chargedVnd = new client.Counter({
    name: 'gateway_charged_vnd_total',
    help: 'VND charged, by operation and model',
    labelNames: ['operation', 'model'] as const,
    registers: [this.registry],
    collect: () => this.addPendingCharges(),
  });
  /** VND of bills the accounts (or their keys' budgets) could not cover: counted once the shortfall is committed. */
  readonly uncollectedVnd = new client.Counter({
    name: 'gateway_uncollected_vnd_total',
    help: 'VND billed by upstream usage but not collected (the account or key budget could not cover it)',
    labelNames: ['operation', 'model'] as const,
    registers: [this.registry],
  });
  readonly upstreamErrors = new client.Counter({
    name: 'gateway_upstream_errors_total',
    help: 'Failed upstream calls by provider and status',
    labelNames: ['provider', 'status'] as const,
    registers: [this.registry],
  });
  readonly rateLimitRedisUp = new client.Gauge({
    name: 'gateway_ratelimit_redis_up',
    help: '1 while the rate limiter reaches Redis (limits shared by all API processes); 0 while it limits per process',
    registers: [this.registry],
  });
  readonly rateLimitLocalDecisions = new client.Counter({
    name: 'gateway_ratelimit_local_decisions_total',
    help: 'Rate-limit checks decided in-process because Redis was unreachable',
    registers: [this.registry],
  });
  readonly rateLimitSliceRefusals = new client.Counter({
    name: 'gateway_ratelimit_slice_refusals_total',
    help: "Rate-limit refusals while room of the key's window sat in slices leased by other API processes",
    registers: [this.registry],
  });
  readonly limitRefusals = new client.Counter({
    name: 'gateway_limit_refusals_total',
    help: 'Requests refused by a per-key limit, by limit (requests, tokens, budget)',
    labelNames: ['limit'] as const,
    registers: [this.registry],
  });
  /**
   * Per label values: the latency histogram's child, and the requests counted since the last scrape. Counters are
   * summed here and added to prom-client when it collects (a scrape): prom-client validates and hashes the labels
   * on every inc and observe, even through a labelled child, which the hot path cannot afford.
   */
  private readonly children = new Map<
    string,
    { labels: Record<string, string>; n: number; time: { observe(v: number): void } }
  >();
  private readonly pendingCharges = new Map<string, { labels: { operation: string; model: string }; vnd: number }>();

  constructor() {
    client.collectDefaultMetrics({ register: this.registry });
  }

  /** Per-deployment routing metrics (src/observability/routingMetrics.ts), read from the router when scraped. */
  observeRouting(source: RoutingSource): void {
    registerRoutingMetrics(this.registry, source);
  }

  /** Adds a request's charge to the VND counter. */
  observeCharge(operation: string, model: string, vnd: number): void {
    const key = `${operation} ${model}`;
    const c = this.pendingCharges.get(key);
    if (c) c.vnd += vnd;
    else {
      if (this.pendingCharges.size >= 10_000) this.addPendingCharges();
      this.pendingCharges.set(key, { labels: { operation, model }, vnd });
    }
  }

  /** Counts one finished request and records its duration. */
  observeRequest(route: string, method: string, status: number, model: string, seconds: number): void {
    const key = `${route} ${method} ${status} ${model}`;
    let c = this.children.get(key);
    if (!c) {
      // Label values come from route patterns and the catalog, so the set is small; the bound is a safety net.
      if (this.children.size >= 10_000) {
        this.addPendingRequests();
        this.children.clear();
      }
      const labels = { route, method, status: String(status), model };
      c = { labels, n: 0, time: this.latency.labels(labels) };
      this.children.set(key, c);
    }
    c.n++;
    c.time.observe(seconds);
  }

  private addPendingRequests(): void {
    for (const c of this.children.values()) {
      if (c.n === 0) continue;
      this.requests.inc(c.labels, c.n);
      c.n = 0;
    }
  }

  private addPendingCharges(): void {
    for (const c of this.pendingCharges.values()) this.chargedVnd.inc(c.labels, c.vnd);
    this.pendingCharges.clear();
  }
}
