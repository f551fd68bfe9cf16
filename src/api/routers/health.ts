import Router from '@koa/router';
import type { AppDeps } from '../../operations';
import { route, type GatewayState } from '../middleware';

/** Liveness, readiness (Postgres and Temporal reachable) and Prometheus metrics. */
export function healthRouter(deps: AppDeps): Router<GatewayState> {
  const r = new Router<GatewayState>();
  r.get('/healthz', route('/healthz'), (ctx) => {
    ctx.body = { status: 'ok' };
  });
  r.get('/readyz', route('/readyz'), async (ctx) => {
    const checks: Record<string, string> = {};
    // Each check gets 2 s, so a hung dependency makes the probe fail rather than hang (timers are cleared).
    const withTimeout = async <T>(p: Promise<T>): Promise<T> => {
      let timer: NodeJS.Timeout | undefined;
      try {
        return await Promise.race([
          p,
          new Promise<T>((_, rej) => {
            timer = setTimeout(() => rej(new Error('timeout after 2 s')), 2000);
          }),
        ]);
      } finally {
        clearTimeout(timer);
      }
    };
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
    } else if (deps.config.temporalAddress === 'off') {
      checks.temporal = 'off'; // a synchronous-only API process, by configuration: not a failure
    } else {
      checks.temporal = 'error: not configured';
    }
    const ok = Object.values(checks).every((v) => v === 'ok' || v === 'off');
    // Informational, never a failure: without Redis the gateway keeps serving and limits per process.
    checks.ratelimit = deps.limiter.mode;
    ctx.status = ok ? 200 : 503;
    ctx.body = { status: ok ? 'ready' : 'not_ready', checks };
  });
  r.get('/metrics', route('/metrics'), async (ctx) => {
    ctx.type = deps.metrics.registry.contentType;
    ctx.body = await deps.metrics.registry.metrics();
  });
  return r;
}
