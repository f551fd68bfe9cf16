import type Koa from 'koa';
import { declareRoute } from '../../observability';
import type { GatewayState } from '../requestState';

/**
 * Labels the request with its route pattern for metrics: the console's and the organizations' routers use it; the
 * API's routes get their label from the route builder (src/api/route.ts).
 */
export function route(name: string): Koa.Middleware<GatewayState> {
  declareRoute(name);
  return async (ctx, next) => {
    ctx.state.route = name;
    await next();
  };
}
