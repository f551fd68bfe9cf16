/**
 * The `route` and `method` labels of every metric. Label values must come from a small fixed set, or each unknown
 * path a scanner tries becomes a new time series (unbounded memory here and in Prometheus). So `route` is only ever
 * a pattern declared by a router at start-up (see `route()` in src/api/middleware.ts), else `unmatched`; `method`
 * is a standard HTTP method, else `OTHER`. Metrics of other layers (deployments, rate limits) label with these too.
 */

export const UNMATCHED_ROUTE = 'unmatched';

const declared = new Set<string>();

/** Registers a route pattern as a label value; called once per route when the routers are built. */
export function declareRoute(pattern: string): string {
  declared.add(pattern);
  return pattern;
}

/** The label for a request's matched route pattern (undefined: no route matched, e.g. 404 or 405). */
export function routeLabel(route: string | undefined): string {
  return route !== undefined && declared.has(route) ? route : UNMATCHED_ROUTE;
}

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/** Node accepts some thirty methods (PROPFIND, MKCOL, ...); only the ones an HTTP API uses get their own label. */
export function methodLabel(method: string): string {
  return METHODS.has(method) ? method : 'OTHER';
}
