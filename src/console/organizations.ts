import type Router from '@koa/router';
import type { AppDeps } from '../operations';
import { route, type Ctx, type GatewayState } from '../api/middleware';
import { auditLogPage, mountOrganizationRoutes, organizationsOf, sessionCaller } from '../organizations';
import { requireCsrf, requireOperator, requireSession, sameOrigin, sessionOf } from './auth';

const PREFIX = '/console/api/organizations/:organization_id';

/**
 * The console's organization pages (projects, members and invites, the audit log, admin keys, limits, usage): the
 * Admin API's own routes and rules (src/organizations/), mounted at /console/api/organizations/<account id>/... for a
 * session instead of an admin key. A member acts with their organization role; an operator opens any organization.
 */
export function mountOrganizationsApi(r: Router<GatewayState>, deps: AppDeps): void {
  const guards = [sameOrigin(deps), requireSession(deps), requireCsrf()];
  const caller = (ctx: Ctx) => sessionCaller(deps.db, sessionOf(ctx), ctx.params.organization_id ?? '', ctx.ip);

  r.get('/console/api/organizations', route('/console/api/organizations'), ...guards, async (ctx) => {
    ctx.body = { object: 'list', data: await organizationsOf(deps.db, sessionOf(ctx)) };
  });
  // The organization and the role the signed-in user acts with in it (the pages hide what a reader cannot do).
  r.get(PREFIX, route(PREFIX), ...guards, async (ctx) => {
    const c = await caller(ctx);
    const name = (await deps.db.query('SELECT name FROM accounts WHERE id = $1', [c.accountId])).rows[0]?.name ?? '';
    ctx.body = { object: 'organization', id: c.accountId, name, role: c.role, user_id: c.userId };
  });
  mountOrganizationRoutes(r, deps, { prefix: PREFIX, guards, caller });

  // The entries of no organization (price and catalog changes, returned transfers), OpenAI's shape as the rest.
  r.get(
    '/console/api/admin/audit_logs',
    route('/console/api/admin/audit_logs'),
    sameOrigin(deps),
    requireSession(deps),
    requireOperator(),
    async (ctx) => {
      ctx.body = await auditLogPage(deps.db, null, ctx.query);
    },
  );
}
