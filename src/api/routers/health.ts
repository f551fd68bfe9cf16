import type Router from '@koa/router';
import type { AppDeps } from '../../operations';
import type { GatewayState } from '../middleware';
import { apiRoutes } from '../route';
import { readiness } from '../../operations';

/** Liveness, readiness (Postgres and Temporal reachable: src/operations/readiness.ts) and Prometheus metrics. */
export function healthRouter(deps: AppDeps): Router<GatewayState> {
  // Probes and the scraper: no API key, no body.
  const api = apiRoutes(deps, { auth: 'none' });
  api.add({
    method: 'GET',
    path: '/healthz',
    handler: (ctx) => {
      ctx.body = { status: 'ok' };
    },
  });
  api.add({
    method: 'GET',
    path: '/readyz',
    handler: async (ctx) => {
      const { ok, checks } = await readiness(deps);
      ctx.status = ok ? 200 : 503;
      ctx.body = { status: ok ? 'ready' : 'not_ready', checks };
    },
  });
  api.add({
    method: 'GET',
    path: '/metrics',
    handler: async (ctx) => {
      ctx.type = deps.metrics.registry.contentType;
      ctx.body = await deps.metrics.registry.metrics();
    },
  });
  return api.router;
}
