import Router from '@koa/router';
import type { AppDeps } from '../api/deps';
import type { GatewayState } from '../api/middleware';

/** Placeholder: the web console is not implemented yet. */
export function consoleRouter(_deps: AppDeps): Router<GatewayState> {
  return new Router<GatewayState>();
}
