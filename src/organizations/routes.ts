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

export function routeTable(r: Router<GatewayState>, deps: OrgDeps): RouteTable {
  const body = jsonBody(64 * 1024);
  const callers = new WeakMap<object, OrgCaller>();
  const auth: Koa.Middleware<GatewayState> = async (ctx, next) => {
    callers.set(ctx, await adminCaller(ctx, deps));
    await next();
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
    get: (path, fn) => void r.get(path, route(path), auth, run(fn)),
    delete: (path, fn) => void r.delete(path, route(path), auth, owner, run(fn)),
    post: (path, fn) => void r.post(path, route(path), auth, owner, body, run(fn)),
    action: (path, fn) => void r.post(path, route(path), auth, owner, run(fn)),
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
