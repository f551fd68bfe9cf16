import { randomUUID } from 'node:crypto';
import type Koa from 'koa';
import type { AppDeps } from '../deps';
import { methodLabel, routeLabel } from '../../observability/routeLabel';
import type { GatewayState } from './state';

/** Request id (echoed as x-request-id), one JSON log line per request, and Prometheus counters/latency. */
export function observe(deps: Pick<AppDeps, 'logger' | 'metrics'>): Koa.Middleware<GatewayState> {
  return async (ctx, next) => {
    const start = process.hrtime.bigint();
    const incoming = ctx.get('x-request-id');
    ctx.state.requestId = /^[\w.:-]{1,128}$/.test(incoming) ? incoming : randomUUID();
    ctx.set('x-request-id', ctx.state.requestId);
    ctx.set('request-id', ctx.state.requestId);
    const done = () => {
      const sec = Number(process.hrtime.bigint() - start) / 1e9;
      // A client that left before the response was complete is a 499 (as nginx logs it), not whatever status
      // Koa held at that moment (404 until a handler sets one).
      const status = ctx.res.writableFinished ? ctx.status : 499;
      deps.metrics.observeRequest(routeLabel(ctx.state.route), methodLabel(ctx.method), status, ctx.state.model ?? '', sec);
      deps.logger.info({ reqId: ctx.state.requestId, method: ctx.method, path: ctx.path, status, ms: Math.round(sec * 1e6) / 1e3, account: ctx.state.principal?.accountId, model: ctx.state.model }, 'request');
    };
    // Log and measure when the response is fully sent (streams finish long after the middleware chain returns).
    ctx.res.once('close', done);
    await next();
  };
}
