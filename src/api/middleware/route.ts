import type Koa from 'koa';
import type { AppDeps } from '../../operations';
import { declareRoute } from '../../observability';
import { authenticate } from './apiKey';
import { addRateLimitHeaders } from './rateLimitHeaders';
import { jsonBodyReader } from './jsonBody';
import type { GatewayState } from '../requestState';

/**
 * The preamble of an authenticated JSON route in one middleware: metrics route label, API key (401 first, before
 * the body is read), JSON body. Same checks as route() + requireApiKey() + jsonBody(), two async hops fewer on
 * the busiest routes. The response carries the key's rate-limit headers whatever the outcome
 * (src/modelCall/rateLimit.ts).
 */
export function jsonApi(
  deps: Pick<AppDeps, 'keys' | 'limiter' | 'adminKeys'>,
  name: string,
  limitBytes: number,
): Koa.Middleware<GatewayState> {
  const read = jsonBodyReader(limitBytes);
  declareRoute(name);
  return async (ctx, next) => {
    ctx.state.route = name;
    await authenticate(ctx, deps.keys, deps.adminKeys);
    try {
      await read(ctx);
      await next();
    } finally {
      await addRateLimitHeaders(ctx, deps);
    }
  };
}

/** Labels the request with its route pattern for metrics (set by each router). */
export function route(name: string): Koa.Middleware<GatewayState> {
  declareRoute(name);
  return async (ctx, next) => {
    ctx.state.route = name;
    await next();
  };
}
