import type Router from '@koa/router';
import type { AppDeps } from '../operations';
import { jsonBody, route, type Ctx, type GatewayState } from '../api/middleware';
import { ApiError, badRequest } from '../errors';
import { createSession, deleteSession, csrfTokenFor, resolveSession } from './sessions';
import { findLoginByEmail, upgradePasswordHash } from './users';
import { decoyHash, verifyPassword, MAX_PASSWORD_LENGTH } from '../auth';
import { readSessionCookie, requireCsrf, requireSession, sameOrigin, sessionCookie, sessionOf } from './auth';
import { LoginRateLimiter } from './rateLimit';
import { getAccount } from './queries';
import { isUnstorableText } from '../db';
import { recordAudit } from '../organizations';
import { passwordRefused } from './ssoSettings';

/** Sign-in, the current session, sign-out. */
export function mountSessionApi(r: Router<GatewayState>, deps: AppDeps, limiter = new LoginRateLimiter()): void {
  const body = jsonBody(16 * 1024);

  const me = async (
    s: { userId: string; accountId: string; email: string; role: string; expiresAt: Date },
    csrfToken: string,
  ) => {
    const acc = await getAccount(deps.db, s.accountId);
    return {
      user: { id: s.userId, email: s.email, role: s.role, accountId: s.accountId, accountName: acc?.name ?? '' },
      csrfToken,
      expiresAt: s.expiresAt.toISOString(),
    };
  };

  r.post('/console/api/session', route('/console/api/session'), sameOrigin(deps), body, async (ctx) => {
    const b = ctx.request.body as Record<string, unknown>;
    const email = typeof b.email === 'string' ? b.email.trim().toLowerCase() : '';
    const password = typeof b.password === 'string' ? b.password : '';
    if (!email) throw badRequest('email is required', 'email', 'missing_required_parameter');
    if (!password) throw badRequest('password is required', 'password', 'missing_required_parameter');
    if (isUnstorableText(email)) throw badRequest('email must be an email address', 'email');
    if (email.length > 320 || password.length > MAX_PASSWORD_LENGTH) throw wrongCredentials();
    const wait = limiter.attempt(email, ctx.ip);
    if (wait > 0) {
      throw new ApiError(
        429,
        `Too many sign-in attempts. Try again in ${Math.ceil(wait / 60)} minute(s).`,
        'rate_limit_error',
        null,
        'too_many_attempts',
        { 'retry-after': String(wait) },
      );
    }
    const user = await findLoginByEmail(deps.db, email);
    // Unknown emails cost one scrypt too, so response time does not reveal which emails exist.
    const ok = await verifyPassword(password, user?.passwordHash ?? (await decoyHash()));
    // Every sign-in and every refused one is in the audit log, with the address it came from.
    const actor = { type: 'session' as const, session: { user: { id: user?.id, email }, ip_address: ctx.ip } };
    // A reader whose organization signs its domain in through its provider (src/console/ssoSettings.ts) is told so,
    // only once the password is right (the answer reveals nothing to whoever does not know it).
    const refused = ok && user && !user.disabledAt && (await passwordRefused(deps.db, user.id));
    if (!user || !ok || user.disabledAt || refused) {
      const error = refused ? ssoRequired() : wrongCredentials();
      await recordAudit(deps.db, {
        accountId: user?.accountId ?? null,
        type: 'login.failed',
        actor,
        details: { error_code: error.code, error_message: error.message },
      });
      throw error;
    }
    await recordAudit(deps.db, { accountId: user.accountId, type: 'login.succeeded', actor, details: {} });
    limiter.succeeded(email, ctx.ip);
    await upgradePasswordHash(deps.db, user.id, user.passwordHash!, password);
    const { token, expiresAt } = await createSession(deps.db, user.id, {
      ip: ctx.ip,
      userAgent: ctx.get('user-agent'),
    });
    ctx.set('set-cookie', sessionCookie(token, { expires: expiresAt, secure: deps.config.consoleSecureCookies }));
    ctx.set('cache-control', 'no-store');
    ctx.body = await me(
      { userId: user.id, accountId: user.accountId, email: user.email, role: user.role, expiresAt },
      csrfTokenFor(token),
    );
  });

  r.get('/console/api/session', route('/console/api/session'), requireSession(deps), async (ctx) => {
    const s = sessionOf(ctx);
    ctx.body = await me(s, s.csrfToken);
  });

  // Sign-out works even when the session already expired (it then just clears the cookie).
  r.delete(
    '/console/api/session',
    route('/console/api/session'),
    sameOrigin(deps),
    async (ctx: Ctx, next) => {
      const token = readSessionCookie(ctx);
      if (token && (await resolveSession(deps.db, token)))
        return requireSession(deps)(ctx, () => requireCsrf()(ctx, next));
      return next();
    },
    async (ctx) => {
      const token = readSessionCookie(ctx);
      if (token) await deleteSession(deps.db, token);
      ctx.set('set-cookie', sessionCookie('', { expires: null, secure: deps.config.consoleSecureCookies }));
      ctx.status = 204;
    },
  );
}

const ssoRequired = () =>
  new ApiError(
    403,
    'Your organization signs you in through its identity provider: use "Sign in with single sign-on".',
    'permission_error',
    null,
    'sso_required',
  );

const wrongCredentials = () =>
  new ApiError(401, 'Wrong email or password.', 'authentication_error', null, 'invalid_credentials');
