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
  constructor() {
    client.collectDefaultMetrics({ register: this.registry });
  }
}
