import client from 'prom-client';

/** What the routing metrics read: each deployment's counters (src/modelCall/deploymentState.ts). */
export interface RoutingSource {
  states: readonly {
    deployment: { id: string; modelId: string };
    requests: number;
    retries: number;
    fallbacks: number;
    cooldowns: number;
    failures: Record<string, number>;
    coolingDown(now: number): boolean;
  }[];
}

/**
 * Per-deployment routing metrics on `registry`, read from the router's own counters when scraped (nothing is done
 * per request here): tries, failures by class, retries and fallbacks it served, cooldowns started, and deployments
 * cooling now. The API's registry (src/observability/metrics.ts) and the worker's (src/worker.ts) each get them.
 */
export function registerRoutingMetrics(registry: client.Registry, source: RoutingSource): void {
  const counter = (name: string, help: string, field: 'requests' | 'retries' | 'fallbacks' | 'cooldowns') =>
    new client.Counter({
      name,
      help,
      labelNames: ['model', 'deployment'] as const,
      registers: [registry],
      collect() {
        this.reset();
        for (const s of source.states)
          if (s[field] > 0) this.inc({ model: s.deployment.modelId, deployment: s.deployment.id }, s[field]);
      },
    });
  counter(
    'gateway_deployment_requests_total',
    'Upstream tries sent to each deployment (first tries, retries and fallbacks)',
    'requests',
  );
  counter(
    'gateway_deployment_retries_total',
    'Tries a deployment served after another deployment of its model failed',
    'retries',
  );
  counter(
    'gateway_deployment_fallbacks_total',
    'Tries a deployment served as a fallback for another model',
    'fallbacks',
  );
  counter('gateway_deployment_cooldowns_total', 'Cooldowns started on each deployment', 'cooldowns');
  new client.Counter({
    name: 'gateway_deployment_failures_total',
    help:
      'Failed upstream tries by deployment and class ' +
      '(connect, timeout, rate_limit, server, conflict, auth, client, stream_cut)',
    labelNames: ['model', 'deployment', 'class'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const s of source.states) {
        for (const [cls, n] of Object.entries(s.failures))
          if (n > 0) this.inc({ model: s.deployment.modelId, deployment: s.deployment.id, class: cls }, n);
      }
    },
  });
  new client.Gauge({
    name: 'gateway_deployments_cooling_down',
    help: 'Deployments in cooldown now',
    registers: [registry],
    collect() {
      const now = Date.now();
      this.set(source.states.reduce((n, s) => n + (s.coolingDown(now) ? 1 : 0), 0));
    },
  });
}
