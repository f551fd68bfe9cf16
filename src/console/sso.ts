import { createHash, randomBytes } from 'node:crypto';
import type Router from '@koa/router';
import type { AppDeps } from '../operations';
import { jsonBody, route, type GatewayState } from '../api/middleware';
import { ApiError, badRequest, notFound } from '../errors';
import { tx, type Db, PG_ERROR, pgErrorCode } from '../db';
import { appendAudit, recordAudit, type AuditActor } from '../organizations';
import { createSession } from './sessions';
import { readCookie, sameOrigin, sessionCookie } from './auth';
import { ConsoleUserError, isUuid, normalizeEmail } from './users';
import { firstSignInRefusal, emailDomain, type Refusal } from './ssoRules';
import { getSsoSettings, ssoForEmail, type SsoSettings } from './ssoSettings';
import { OidcRelyingParty, type ProviderIdentity } from './ssoClient';

/**
 * Console sign-in through an organization's OpenID Connect provider. POST /console/api/sso/start (an email, whose
 * domain names the organization, or the organization's id) answers the provider's authorization URL and sets a
 * cookie that binds the sign-in to this browser; the provider sends the browser back to GET
 * /console/api/sso/callback, which finishes it once: a known identity (issuer and subject) signs in to its login, a
 * new one joins the organization with its default role when the provider verified an email of a trusted domain.
 * Sign-ins and refusals are in the audit log as password sign-ins are (login.succeeded, login.failed).
 */

export const SSO_COOKIE = 'gw_sso';
const CALLBACK = '/console/api/sso/callback';
const SIGN_IN_TTL_MS = 10 * 60 * 1000;

class SsoRefusal extends Error {
  constructor(readonly refusal: Refusal) {
    super(refusal.message);
  }
}
const refuse = (code: string, message: string) => new SsoRefusal({ code, message });

const hashOf = (token: string) => createHash('sha256').update('sso').update('\0').update(token).digest();

/**
 * The cookie of a sign-in under way: SameSite=Lax, because the provider's redirect back is a cross-site navigation
 * (a Strict cookie would not come with it); scoped to the sign-in's own paths, and gone in ten minutes.
 */
function ssoCookie(value: string, secure: boolean): string {
  const parts = [`${SSO_COOKIE}=${value}`, 'Path=/console/api/sso', 'HttpOnly', 'SameSite=Lax'];
  parts.push(value ? `Max-Age=${SIGN_IN_TTL_MS / 1000}` : 'Max-Age=0');
  if (secure) parts.push('Secure');
  return parts.join('; ');
}

interface Pending {
  account_id: string;
  state: string;
  nonce: string;
  code_verifier: string;
}

/** The sign-in this cookie started, taken once (the row goes whatever the outcome), if it has not expired. */
async function takeSignIn(db: Db, token: string): Promise<Pending | null> {
  if (!/^[\w-]{43}$/.test(token)) return null;
  const r = await db.query(
    `DELETE FROM console_sso_sign_ins WHERE token_hash = $1 RETURNING account_id, state, nonce, code_verifier,
       expires_at > now() AS live`,
    [hashOf(token)],
  );
  return r.rows[0]?.live ? r.rows[0] : null;
}

const sessionActor = (user: { id?: string; email: string }, ip: string): AuditActor => ({
  type: 'session',
  session: { user, ip_address: ip },
});

/**
 * The login a provider's identity signs in to: the one linked to it, or (first sign-in) the organization's login of
 * that email, linked now, or a new member with the organization's default role.
 */
async function loginFor(db: Db, s: SsoSettings, id: ProviderIdentity, ip: string) {
  return tx(db, async (c) => {
    const linked = await c.query(
      `SELECT u.id, u.email, u.account_id, u.disabled_at, u.removed_at
         FROM console_user_identities i JOIN console_users u ON u.id = i.user_id
        WHERE i.issuer = $1 AND i.subject = $2`,
      [id.iss, id.sub],
    );
    if (linked.rowCount) {
      const u = linked.rows[0];
      if (u.account_id !== s.accountId)
        throw refuse('sso_wrong_organization', 'This identity signs in to another organization.');
      if (u.disabled_at || u.removed_at)
        throw refuse('sso_login_disabled', 'This console login is disabled or was removed from the organization.');
      await c.query('UPDATE console_user_identities SET last_sign_in_at = now() WHERE issuer = $1 AND subject = $2', [
        id.iss,
        id.sub,
      ]);
      return { id: u.id as string, email: u.email as string };
    }
    const refused = firstSignInRefusal(id, s.trustedDomains);
    if (refused) throw new SsoRefusal(refused);
    let email: string;
    try {
      email = normalizeEmail(id.email);
    } catch (e) {
      if (e instanceof ConsoleUserError) throw refuse('sso_email_invalid', 'The email address given is not usable.');
      throw e;
    }
    const existing = await c.query(
      'SELECT id, account_id, disabled_at, removed_at FROM console_users WHERE lower(email) = $1 FOR UPDATE',
      [email],
    );
    let userId: string;
    if (existing.rowCount) {
      // The organization trusts the domain and the provider verified the address: the login is this person's.
      const u = existing.rows[0];
      if (u.account_id !== s.accountId)
        throw refuse('sso_email_taken', `The console login ${email} belongs to another organization.`);
      if (u.disabled_at || u.removed_at)
        throw refuse('sso_login_disabled', 'This console login is disabled or was removed from the organization.');
      userId = u.id;
    } else {
      const made = await c.query(
        `INSERT INTO console_users (account_id, email, password_hash, org_role) VALUES ($1, $2, NULL, $3) RETURNING id`,
        [s.accountId, email, s.defaultRole],
      );
      userId = made.rows[0].id;
      await appendAudit(c, {
        accountId: s.accountId,
        type: 'user.added',
        actor: sessionActor({ id: userId, email }, ip),
        resourceId: userId,
        details: { id: userId, data: { role: s.defaultRole } },
      });
    }
    try {
      await c.query('INSERT INTO console_user_identities (issuer, subject, user_id) VALUES ($1, $2, $3)', [
        id.iss,
        id.sub,
        userId,
      ]);
    } catch (e) {
      if (pgErrorCode(e) !== PG_ERROR.uniqueViolation) throw e;
      throw refuse(
        'sso_identity_mismatch',
        `The console login ${email} is linked to another identity at this provider.`,
      );
    }
    return { id: userId, email };
  });
}

export function mountSso(r: Router<GatewayState>, deps: AppDeps, rp: OidcRelyingParty): void {
  const redirectUri = `${deps.config.publicBaseUrl}${CALLBACK}`;
  const secure = deps.config.consoleSecureCookies;

  r.post(
    '/console/api/sso/start',
    route('/console/api/sso/start'),
    sameOrigin(deps),
    jsonBody(16 * 1024),
    async (ctx) => {
      const b = (ctx.request.body ?? {}) as Record<string, unknown>;
      let s: SsoSettings | null;
      let hint: string | null = null;
      if (typeof b.email === 'string' && b.email.trim()) {
        let email: string;
        try {
          email = normalizeEmail(b.email);
        } catch {
          throw badRequest('email must be an email address', 'email');
        }
        s = await ssoForEmail(deps.db, email);
        if (!s)
          throw notFound(
            `No single sign-on is set up for ${emailDomain(email) ?? email}.`,
            'sso_not_configured',
            'email',
          );
        hint = email;
      } else if (typeof b.organization === 'string') {
        s = isUuid(b.organization) ? await getSsoSettings(deps.db, b.organization) : null;
        if (!s) throw notFound('This organization has no single sign-on.', 'sso_not_configured', 'organization');
      } else {
        throw badRequest('email is required', 'email', 'missing_required_parameter');
      }
      let start;
      try {
        start = await rp.start(s, redirectUri, hint);
      } catch (e) {
        deps.logger.warn({ err: e, issuer: s.issuer }, 'console sso: the provider could not be reached');
        throw new ApiError(
          502,
          "The organization's identity provider could not be reached. Try again, or sign in with a password.",
          'server_error',
          null,
          'sso_provider_unreachable',
        );
      }
      const token = randomBytes(32).toString('base64url');
      await deps.db.query(
        `INSERT INTO console_sso_sign_ins (token_hash, account_id, state, nonce, code_verifier, expires_at)
       VALUES ($1, $2, $3, $4, $5, $6)`,
        [
          hashOf(token),
          s.accountId,
          start.state,
          start.nonce,
          start.codeVerifier,
          new Date(Date.now() + SIGN_IN_TTL_MS),
        ],
      );
      deps.db.query('DELETE FROM console_sso_sign_ins WHERE expires_at < now()').catch(() => undefined);
      ctx.set('set-cookie', ssoCookie(token, secure));
      ctx.set('cache-control', 'no-store');
      ctx.body = { url: start.url.href };
    },
  );

  // A browser navigation, not an API call: it ends in a redirect, to the console or back to sign-in with a code.
  r.get(CALLBACK, route(CALLBACK), async (ctx) => {
    ctx.set('cache-control', 'no-store');
    const cookies = [ssoCookie('', secure)];
    const token = readCookie(ctx, SSO_COOKIE);
    const pending = token ? await takeSignIn(deps.db, token) : null;
    const who: { id?: string; email: string } = { email: '' };
    try {
      if (!pending) throw refuse('sso_expired', 'This sign-in expired or was used already. Start again.');
      const s = await getSsoSettings(deps.db, pending.account_id);
      if (!s) throw refuse('sso_not_configured', 'This organization has no single sign-on.');
      const callbackUrl = new URL(redirectUri);
      callbackUrl.search = ctx.querystring;
      let identity: ProviderIdentity;
      try {
        identity = await rp.finish(s, callbackUrl, {
          state: pending.state,
          nonce: pending.nonce,
          codeVerifier: pending.code_verifier,
        });
      } catch (e) {
        deps.logger.info({ err: e, issuer: s.issuer }, 'console sso: the answer was refused');
        throw refuse('sso_failed', `The identity provider's answer was refused: ${(e as Error).message}`.slice(0, 500));
      }
      if (typeof identity.email === 'string') who.email = identity.email.trim().toLowerCase().slice(0, 320);
      const user = await loginFor(deps.db, s, identity, ctx.ip);
      Object.assign(who, user);
      await recordAudit(deps.db, {
        accountId: s.accountId,
        type: 'login.succeeded',
        actor: sessionActor(who, ctx.ip),
        details: {},
      });
      const session = await createSession(deps.db, user.id, { ip: ctx.ip, userAgent: ctx.get('user-agent') });
      cookies.push(sessionCookie(session.token, { expires: session.expiresAt, secure }));
      ctx.set('set-cookie', cookies);
      ctx.status = 303;
      ctx.redirect('/console/');
    } catch (e) {
      if (!(e instanceof SsoRefusal)) throw e;
      await recordAudit(deps.db, {
        accountId: pending?.account_id ?? null,
        type: 'login.failed',
        actor: sessionActor(who, ctx.ip),
        details: { error_code: e.refusal.code, error_message: e.refusal.message },
      });
      ctx.set('set-cookie', cookies);
      ctx.status = 303;
      ctx.redirect(`/console/login?sso_error=${e.refusal.code}`);
    }
  });
}
