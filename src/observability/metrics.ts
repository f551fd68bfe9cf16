import client from 'prom-client';

/** Prometheus metrics (prom-client). One registry per process; tests may create apps repeatedly. */
export class Metrics {
  readonly registry = new client.Registry();
  readonly requests = new client.Counter({
    name: 'gateway_http_requests_total', help: 'HTTP requests by route, method, status and model',
    labelNames: ['route', 'method', 'status', 'model'] as const, registers: [this.registry],
  });
  readonly latency = new client.Histogram({
    name: 'gateway_http_request_duration_seconds', help: 'Request duration until the response is fully sent (streams included), by route, status and model',
    labelNames: ['route', 'method', 'status', 'model'] as const, registers: [this.registry],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
  });
  readonly chargedVnd = new client.Counter({
    name: 'gateway_charged_vnd_total', help: 'VND charged, by operation and model',
    labelNames: ['operation', 'model'] as const, registers: [this.registry],
  });
  readonly upstreamErrors = new client.Counter({
    name: 'gateway_upstream_errors_total', help: 'Failed upstream calls by provider and status',
    labelNames: ['provider', 'status'] as const, registers: [this.registry],
  });
  /** Labelled children by label values: prom-client hashes the label object on every call (~10 µs a request). */
  private readonly children = new Map<string, { count: { inc(): void }; time: { observe(v: number): void } }>();

  constructor() {
    client.collectDefaultMetrics({ register: this.registry });
  }

  private readonly chargeChildren = new Map<string, { inc(v: number): void }>();

  /** Adds a request's charge to the VND counter. */
  observeCharge(operation: string, model: string, vnd: number): void {
    const key = `${operation} ${model}`;
    let c = this.chargeChildren.get(key);
    if (!c) {
      if (this.chargeChildren.size >= 10_000) this.chargeChildren.clear();
      c = this.chargedVnd.labels({ operation, model });
      this.chargeChildren.set(key, c);
    }
    c.inc(vnd);
  }

  /** Counts one finished request and records its duration. */
  observeRequest(route: string, method: string, status: number, model: string, seconds: number): void {
    const key = `${route} ${method} ${status} ${model}`;
    let c = this.children.get(key);
    if (!c) {
      // Label values come from route patterns and the catalog, so the set is small; the bound is a safety net.
      if (this.children.size >= 10_000) this.children.clear();
      const labels = { route, method, status: String(status), model };
      c = { count: this.requests.labels(labels), time: this.latency.labels(labels) };
      this.children.set(key, c);
    }
    c.count.inc();
    c.time.observe(seconds);
  }
}
