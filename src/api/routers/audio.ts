import Router from '@koa/router';
import type { AppDeps } from '../deps';
import type { GatewayState } from '../middleware';

/** Placeholder: this API family is not implemented yet. */
export function audioRouter(_deps: AppDeps): Router<GatewayState> {
  return new Router<GatewayState>();
}
