import type Koa from 'koa';
import type Router from '@koa/router';
import type { GatewayState } from './middleware';

/**
 * Sends each request to the router of its API family by path prefix (the first two segments, e.g. `/v1/chat`),
 * so a request runs one router's matching instead of every router's.
 * A router with a parameter or pattern in its first two segments is tried for every path, after the prefix match.
 */
export type Dispatcher = Koa.Middleware<GatewayState> & { routers: Router<GatewayState>[] };

export function prefixOf(path: string): string {
  const second = path.indexOf('/', 1);
  if (second < 0) return path;
  const third = path.indexOf('/', second + 1);
  return third < 0 ? path : path.slice(0, third);
}

type Mw = Koa.Middleware<GatewayState>;

/** Runs middlewares in order, each one's `next` being the following one (Koa's composition). */
function compose(mws: Mw[]): Mw {
  return (ctx, next) => {
    const run = (i: number): Promise<void> =>
      i < mws.length ? Promise.resolve(mws[i](ctx, () => run(i + 1))) : Promise.resolve(next());
    return run(0);
  };
}

interface RouteLayer {
  path: string | RegExp;
  methods: string[];
  stack: Mw[];
}

/**
 * `METHOD /exact/path` -> that route's middleware, composed once, for every static route (no parameters) of a
 * router without router-level middleware. A request whose method and path match one exactly skips @koa/router's
 * per-request matching, layer-chain building and allowedMethods pass; anything else (case or
 * trailing-slash variants, HEAD, parameters, unknown paths) goes through the routers. A method and
 * path declared twice is left to the routers.
 */
function exactRoutes(routers: Router<GatewayState>[]): Map<string, Mw> {
  const found = new Map<string, Mw[] | null>();
  for (const r of routers) {
    const layers = r.stack as unknown as RouteLayer[];
    // router.use() middleware: the router's own dispatch runs it.
    if (layers.some((l) => l.methods.length === 0)) continue;
    for (const l of layers) {
      if (typeof l.path !== 'string' || /[:(*?{]/.test(l.path)) continue;
      for (const m of l.methods) {
        if (m === 'HEAD') continue;
        const key = `${m} ${l.path}`;
        found.set(key, found.has(key) ? null : l.stack);
      }
    }
  }
  const out = new Map<string, Mw>();
  for (const [key, stack] of found) if (stack) out.set(key, compose(stack));
  return out;
}

export function dispatchByPrefix(routers: Router<GatewayState>[]): Dispatcher {
  const byPrefix = new Map<string, Router<GatewayState>[]>();
  const everywhere: Router<GatewayState>[] = [];
  for (const r of routers) {
    const prefixes = new Set<string>();
    let dynamic = false;
    for (const layer of r.stack as { path: string | RegExp }[]) {
      if (typeof layer.path !== 'string') {
        dynamic = true;
        continue;
      }
      const p = prefixOf(layer.path);
      if (/[:(*?]/.test(p)) dynamic = true;
      else prefixes.add(p);
    }
    if (dynamic) everywhere.push(r);
    else for (const p of prefixes) byPrefix.set(p, [...(byPrefix.get(p) ?? []), r]);
  }
  const chain = (rs: Router<GatewayState>[]) =>
    compose(rs.flatMap((r) => [r.routes(), r.allowedMethods({ throw: false })]) as Mw[]);
  const fallback = chain(everywhere);
  const chains = new Map([...byPrefix].map(([p, rs]) => [p, chain([...rs, ...everywhere])]));
  const exact = exactRoutes(routers);
  const mw = ((ctx, next) => {
    const route = exact.get(`${ctx.method} ${ctx.path}`);
    if (route) {
      ctx.params = {};
      return route(ctx, next);
    }
    return (chains.get(prefixOf(ctx.path)) ?? fallback)(ctx, next);
  }) as Dispatcher;
  mw.routers = routers;
  return mw;
}
