import type Koa from 'koa';
import type Router from '@koa/router';
import { jsonBody, route, type Ctx, type GatewayState } from '../api/middleware';
import { ApiError, notFound } from '../errors';
import { tx, type DbClient } from '../db';
import { appendAudit, type AuditEntry } from './audit';
import { adminCaller, type OrgCaller, type OrgDeps } from './http';

/** One organization route's handler: the caller is authenticated before it runs. */
export type OrgHandler = (ctx: Ctx, caller: OrgCaller) => Promise<unknown>;

/**
 * Registers routes on a router, each labelled, authenticated (before any body is read: an anonymous client's body
 * is never parsed) and answered with its handler's JSON.
 */
export interface RouteTable {
  get(path: string, fn: OrgHandler): void;
  post(path: string, fn: OrgHandler): void;
  /** A POST that takes no body (archive): whatever body comes is not read. */
  action(path: string, fn: OrgHandler): void;
  delete(path: string, fn: OrgHandler): void;
}

/**
 * Where the routes are mounted and who calls them: the Admin API (an admin key, at /v1/organization), or the console
 * (a session, at /console/api/organizations/:organization_id, with its own checks first). The handlers and the role
 * rules are the same for both.
 */
export interface Mount {
  /** Replaces `/v1/organization` in every path. */
  prefix: string;
  /** Middleware run before the caller is resolved (the console's origin, session and CSRF checks). */
  guards: Koa.Middleware<GatewayState>[];
  caller(ctx: Ctx): Promise<OrgCaller>;
}

export const adminApiMount = (deps: OrgDeps): Mount => ({
  prefix: '/v1/organization',
  guards: [],
  caller: (ctx) => adminCaller(ctx, deps),
});

export function routeTable(r: Router<GatewayState>, deps: OrgDeps, mount: Mount = adminApiMount(deps)): RouteTable {
  const body = jsonBody(64 * 1024);
  const callers = new WeakMap<object, OrgCaller>();
  const auth: Koa.Middleware<GatewayState> = async (ctx, next) => {
    callers.set(ctx, await mount.caller(ctx));
    await next();
  };
  const at = (path: string) => mount.prefix + path.slice('/v1/organization'.length);
  const add = (method: 'get' | 'post' | 'delete', path: string, ...mw: Koa.Middleware<GatewayState>[]): void => {
    const p = at(path);
    r[method](p, route(p), ...mount.guards, auth, ...mw);
  };
  // Every POST and DELETE changes something: an owner's, never a reader's.
  const owner: Koa.Middleware<GatewayState> = async (ctx, next) => {
    if (callers.get(ctx)!.role !== 'owner')
      throw new ApiError(
        403,
        "Readers of the organization change nothing: this needs the organization's owner role.",
        'invalid_request_error',
        null,
        'owner_role_required',
      );
    await next();
  };
  const run =
    (fn: OrgHandler): Koa.Middleware<GatewayState> =>
    async (ctx) => {
      ctx.body = await fn(ctx, callers.get(ctx)!);
    };
  return {
    get: (path, fn) => add('get', path, run(fn)),
    delete: (path, fn) => add('delete', path, owner, run(fn)),
    post: (path, fn) => add('post', path, owner, body, run(fn)),
    action: (path, fn) => add('post', path, owner, run(fn)),
  };
}

/** The JSON body (read by http.jsonBody; an empty body is `{}`). */
export const bodyOf = (ctx: Ctx): unknown => (ctx.request as { body?: unknown }).body ?? {};

/** A path id of the organization's, or 404 (another organization's ids are as unknown as made-up ones). */
export const missing = (what: string, id: string) => notFound(`No ${what} found with id '${id}'.`);

/**
 * Makes a change and records its audit entry in one transaction, so neither commits without the other. A change
 * that finds nothing to change (null) records nothing.
 */
export function audited<T>(
  deps: OrgDeps,
  caller: OrgCaller,
  change: (c: DbClient) => Promise<T | null>,
  entries: (v: T) => Omit<AuditEntry, 'accountId' | 'actor'>[],
): Promise<T | null> {
  return tx(deps.db, async (c) => {
    const v = await change(c);
    if (v === null) return null;
    for (const e of entries(v)) await appendAudit(c, { ...e, accountId: caller.accountId, actor: caller.actor });
    return v;
  });
}
