import Router from '@koa/router';
import type { GatewayState } from '../api/middleware';
import type { OrgDeps } from './http';
import { routeTable, type Mount } from './routes';
import { projectRoutes } from './projectsRoutes';
import { adminKeyRoutes } from './adminKeysRoutes';
import { auditRoutes } from './auditRoutes';
import { usageRoutes } from './usageRoutes';
import { memberRoutes, mountInviteAcceptance } from './membersRoutes';
import { spendLimitRoutes } from './spendLimitRoutes';
import { rateLimitRoutes } from './rateLimitRoutes';
import { spendAlertRoutes } from './spendAlertRoutes';

/**
 * OpenAI's Admin API (/v1/organization/*) for the gateway's organizations: one account is one organization. The
 * contract is OpenAI's published OpenAPI description (test/fixtures/openai-admin-openapi.json); every answer is an
 * object of it, amounts excepted (VND).
 */
export function organizationsRouter(deps: OrgDeps): Router<GatewayState> {
  const r = new Router<GatewayState>();
  mountOrganizationRoutes(r, deps);
  mountInviteAcceptance(r, deps);
  return r;
}

/** Every Admin API route on `r`, at the mount's prefix and with its caller (default: /v1/organization, admin keys). */
export function mountOrganizationRoutes(r: Router<GatewayState>, deps: OrgDeps, mount?: Mount): void {
  const t = routeTable(r, deps, mount);
  projectRoutes(t, deps);
  adminKeyRoutes(t, deps);
  auditRoutes(t, deps);
  usageRoutes(t, deps);
  memberRoutes(t, deps);
  spendLimitRoutes(t, deps);
  rateLimitRoutes(t, deps);
  spendAlertRoutes(t, deps);
}
