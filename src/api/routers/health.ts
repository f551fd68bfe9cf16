import Router from '@koa/router';
import type { AppDeps } from '../deps';
import { route, type GatewayState } from '../middleware';

/** Liveness, readiness (Postgres and Temporal reachable) and Prometheus metrics. */
export function healthRouter(deps: AppDeps): Router<GatewayState> {
  const r = new Router<GatewayState>();
  r.get('/healthz', route('/healthz'), (ctx) => {
    ctx.body = { status: 'ok' };
  });
  r.get('/readyz', route('/readyz'), async (ctx) => {
    const checks: Record<string, string> = {};
    const withTimeout = <T>(p: Promise<T>) => Promise.race([p, new Promise<T>((_, rej) => setTimeout(() => rej(new Error('timeout')), 2000))]);
    try {
      await withTimeout(deps.db.query('SELECT 1'));
      checks.postgres = 'ok';
    } catch (e) {
      checks.postgres = `error: ${(e as Error).message}`;
    }
    if (deps.temporal) {
      try {
        await withTimeout(deps.temporal.workflowService.getSystemInfo({}));
        checks.temporal = 'ok';
      } catch (e) {
        checks.temporal = `error: ${(e as Error).message}`;
      }
    } else {
      checks.temporal = 'error: not configured';
    }
    const ok = Object.values(checks).every((v) => v === 'ok');
    ctx.status = ok ? 200 : 503;
    ctx.body = { status: ok ? 'ready' : 'not_ready', checks };
  });
  r.get('/metrics', route('/metrics'), async (ctx) => {
    ctx.type = deps.metrics.registry.contentType;
    ctx.body = await deps.metrics.registry.metrics();
  });
  return r;
}
