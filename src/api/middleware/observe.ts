import { randomUUID } from 'node:crypto';
import type Koa from 'koa';
import type { AppDeps } from '../../operations';
import { methodLabel, routeLabel, tracer } from '../../observability';
import type { GatewayState } from '../requestState';
import { CLIENT_CLOSED } from '../../net';

/**
 * Request id (echoed as x-request-id), one JSON log line per request, Prometheus counters/latency, and, while
 * tracing is on, the request's server span (a child of the client's traceparent), ended with the response.
 */
export function observe(deps: Pick<AppDeps, 'logger' | 'metrics'>): Koa.Middleware<GatewayState> {
  return async (ctx, next) => {
    const start = process.hrtime.bigint();
    const incoming = ctx.get('x-request-id');
    ctx.state.requestId = /^[\w.:-]{1,128}$/.test(incoming) ? incoming : randomUUID();
    ctx.set('x-request-id', ctx.state.requestId);
    ctx.set('request-id', ctx.state.requestId);
    const span = tracer ? tracer.startServer(ctx.method, ctx.path, ctx.req.headers) : null;
    if (span) ctx.state.span = span;
    const done = () => {
      const sec = Number(process.hrtime.bigint() - start) / 1e9;
      // A client that left before the response was complete is a 499 (as nginx logs it), not whatever status
      // Koa held at that moment (404 until a handler sets one); a stream the upstream cut short, as it ended.
      const status = ctx.res.writableFinished ? (ctx.state.endedWith ?? ctx.status) : CLIENT_CLOSED;
      deps.metrics.observeRequest(
        routeLabel(ctx.state.route),
        methodLabel(ctx.method),
        status,
        ctx.state.model ?? '',
        sec,
      );
      const line = {
        reqId: ctx.state.requestId,
        method: ctx.method,
        path: ctx.path,
        status,
        ms: Math.round(sec * 1e6) / 1e3,
        account: ctx.state.principal?.accountId,
        model: ctx.state.model,
      };
      if (span && tracer) {
        const m = ctx.state.call?.meter;
        tracer.endServer(span, {
          method: ctx.method,
          route: ctx.state.route,
          status,
          accountId: ctx.state.principal?.accountId,
          keyId: ctx.state.principal?.keyId,
          model: m?.model ?? ctx.state.model,
          requestedModel: ctx.state.model,
          operation: m?.operation,
          body: (ctx.request as { body?: unknown }).body,
        });
        deps.logger.info({ ...line, ...tracer.logFields(span) }, 'request');
      } else deps.logger.info(line, 'request');
    };
    // Log and measure when the response is fully sent (streams finish long after the middleware chain returns).
    ctx.res.once('close', done);
    await next();
  };
}
