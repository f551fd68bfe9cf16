import type Koa from 'koa';
import type Router from '@koa/router';
import type { AppDeps } from '../operations';
import { jsonBody, route, type GatewayState } from '../api/middleware';
import { ApiError, badRequest } from '../errors';
import { tx } from '../db';
import { compileJson, type Validator } from '../schemas';
import { appendAudit } from '../organizations';
import { requireCsrf, requireSession, sameOrigin, sessionOf } from './auth';
import { issuerProblem, normalizeDomain } from './ssoRules';
import { deleteSsoSettings, getSsoSettings, putSsoSettings, type SsoSettings } from './ssoSettings';
import type { OidcRelyingParty } from './ssoClient';

/**
 * An organization's single sign-on settings, for its owners: GET, PUT and DELETE /console/api/sso/settings. A change
 * is in the audit log as `organization.updated` (OpenAI's type for an organization's settings) with what was asked
 * for under `changes_requested.sso`; the client secret is never shown back nor logged, only whether it changed.
 */

const PRINTABLE = '^[^\\u0000-\\u001f\\u007f\\ud800-\\udfff]*$';
const checkSettings: Validator<{
  issuer: string;
  client_id: string;
  client_secret?: string;
  trusted_domains: string[];
  default_role: 'owner' | 'reader';
}> = compileJson({
  type: 'object',
  required: ['issuer', 'client_id', 'trusted_domains', 'default_role'],
  properties: {
    issuer: { type: 'string', minLength: 1, maxLength: 500, pattern: PRINTABLE },
    client_id: { type: 'string', minLength: 1, maxLength: 500, pattern: PRINTABLE },
    client_secret: { type: 'string', minLength: 1, maxLength: 2000, pattern: PRINTABLE },
    trusted_domains: { type: 'array', minItems: 1, maxItems: 50, items: { type: 'string', maxLength: 253 } },
    default_role: { enum: ['owner', 'reader'] },
  },
  additionalProperties: false,
});

/** Only the organization's owners (readers and operators of other accounts see nothing). */
function requireOwner(deps: Pick<AppDeps, 'db'>): Koa.Middleware<GatewayState> {
  return async (ctx, next) => {
    const r = await deps.db.query('SELECT org_role FROM console_users WHERE id = $1 AND removed_at IS NULL', [
      sessionOf(ctx).userId,
    ]);
    if (r.rows[0]?.org_role !== 'owner')
      throw new ApiError(
        403,
        "Single sign-on is set by the organization's owners.",
        'permission_error',
        null,
        'owner_role_required',
      );
    await next();
  };
}

export function mountSsoSettingsApi(r: Router<GatewayState>, deps: AppDeps, rp: OidcRelyingParty): void {
  const P = '/console/api/sso/settings';
  const redirectUri = `${deps.config.publicBaseUrl}/console/api/sso/callback`;
  const view = (s: SsoSettings | null) => ({
    sso: s && {
      issuer: s.issuer,
      client_id: s.clientId,
      client_secret_set: true,
      trusted_domains: s.trustedDomains,
      default_role: s.defaultRole,
      updated_at: s.updatedAt.toISOString(),
    },
    // What the owner registers at the provider as the client's redirect URI.
    redirect_uri: redirectUri,
  });
  const actorOf = (ctx: Parameters<Koa.Middleware<GatewayState>>[0]) => {
    const s = sessionOf(ctx);
    return { type: 'session' as const, session: { user: { id: s.userId, email: s.email }, ip_address: ctx.ip } };
  };

  r.get(P, route(P), requireSession(deps), requireOwner(deps), async (ctx) => {
    ctx.body = view(await getSsoSettings(deps.db, sessionOf(ctx).accountId));
  });

  r.put(
    P,
    route(P),
    sameOrigin(deps),
    requireSession(deps),
    requireCsrf(),
    requireOwner(deps),
    jsonBody(16 * 1024),
    async (ctx) => {
      const b = ctx.request.body as unknown;
      checkSettings(b);
      const accountId = sessionOf(ctx).accountId;
      const issuer = b.issuer.trim();
      const problem = issuerProblem(issuer, deps.config.fetchAllowHosts);
      if (problem) throw badRequest(problem, 'issuer');
      const domains: string[] = [];
      for (const d of b.trusted_domains) {
        const n = normalizeDomain(d);
        if (!n)
          throw badRequest(`trusted_domains: ${JSON.stringify(d).slice(0, 80)} is not a domain`, 'trusted_domains');
        if (!domains.includes(n)) domains.push(n);
      }
      const current = await getSsoSettings(deps.db, accountId);
      const secret = b.client_secret ?? current?.clientSecret;
      if (!secret) throw badRequest('client_secret is required', 'client_secret', 'missing_required_parameter');
      // The issuer must answer discovery now: a typo is caught here, not at every member's next sign-in.
      try {
        await rp.discover(issuer, b.client_id, secret);
      } catch (e) {
        throw badRequest(
          `The issuer's discovery document could not be read: ${(e as Error).message}`.slice(0, 500),
          'issuer',
          'sso_issuer_unreachable',
        );
      }
      const saved = await tx(deps.db, async (c) => {
        const s = await putSsoSettings(c, {
          accountId,
          issuer,
          clientId: b.client_id,
          clientSecret: b.client_secret ?? null,
          trustedDomains: domains,
          defaultRole: b.default_role,
        });
        await appendAudit(c, {
          accountId,
          type: 'organization.updated',
          actor: actorOf(ctx),
          resourceId: accountId,
          details: {
            id: accountId,
            changes_requested: {
              sso: {
                issuer,
                client_id: b.client_id,
                client_secret_changed: b.client_secret !== undefined,
                trusted_domains: domains,
                default_role: b.default_role,
              },
            },
          },
        });
        return s;
      });
      ctx.body = view(saved);
    },
  );

  r.delete(P, route(P), sameOrigin(deps), requireSession(deps), requireCsrf(), requireOwner(deps), async (ctx) => {
    const accountId = sessionOf(ctx).accountId;
    await tx(deps.db, async (c) => {
      if (!(await deleteSsoSettings(c, accountId))) return;
      await appendAudit(c, {
        accountId,
        type: 'organization.updated',
        actor: actorOf(ctx),
        resourceId: accountId,
        details: { id: accountId, changes_requested: { sso: null } },
      });
    });
    ctx.body = view(null);
  });
}
