import type Koa from 'koa';
import type { AppDeps } from '../operations';
import type { GatewayState, Ctx } from '../api/middleware';
import { ApiError } from '../errors';
import { csrfMatches, resolveSession, SESSION_COOKIE, type Session } from './sessions';

/**
 * Console authentication: a session cookie only. This path never looks at Authorization or x-api-key (and the /v1
 * path never looks at cookies; the cookie is also scoped to Path=/console so browsers never send it to /v1).
 */

type ConsoleState = GatewayState & { session?: Session; sessionToken?: string };

export function sessionOf(ctx: Ctx): Session {
  const s = (ctx.state as ConsoleState).session;
  if (!s) throw unauthenticated();
  return s;
}

export const unauthenticated = () =>
  new ApiError(401, 'Sign in to the console first.', 'authentication_error', null, 'not_signed_in');

export function readSessionCookie(ctx: Ctx): string {
  const header = ctx.get('cookie');
  for (const part of header.split(';')) {
    const i = part.indexOf('=');
    if (i > 0 && part.slice(0, i).trim() === SESSION_COOKIE) return part.slice(i + 1).trim();
  }
  return '';
}

/**
 * Serialises the session cookie by hand: koa's cookie helper refuses `Secure` unless it sees TLS itself, which a
 * gateway behind a TLS-terminating proxy (config.consoleSecureCookies) does not.
 */
export function sessionCookie(value: string, opts: { expires: Date | null; secure: boolean }): string {
  const parts = [`${SESSION_COOKIE}=${value}`, 'Path=/console', 'HttpOnly', 'SameSite=Strict'];
  parts.push(opts.expires ? `Expires=${opts.expires.toUTCString()}` : 'Max-Age=0');
  if (opts.secure) parts.push('Secure');
  return parts.join('; ');
}

/** Requires a live session; 401 otherwise. */
export function requireSession(deps: Pick<AppDeps, 'db'>): Koa.Middleware<GatewayState> {
  return async (ctx, next) => {
    const token = readSessionCookie(ctx);
    const s = token ? await resolveSession(deps.db, token) : null;
    if (!s) throw unauthenticated();
    const st = ctx.state as ConsoleState;
    st.session = s;
    st.sessionToken = token;
    ctx.set('cache-control', 'no-store');
    await next();
  };
}

export function requireOperator(): Koa.Middleware<GatewayState> {
  return async (ctx, next) => {
    if (sessionOf(ctx).role !== 'operator')
      throw new ApiError(403, 'This page is for operators only.', 'permission_error', null, 'operator_only');
    await next();
  };
}

const SAFE = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Cross-site request checks for state-changing console requests: the Origin (or, without it, Sec-Fetch-Site)
 * must be this site's own. Applied to sign-in too (login CSRF), before any session exists.
 */
export function sameOrigin(deps: Pick<AppDeps, 'config'>): Koa.Middleware<GatewayState> {
  const configured = safeOrigin(deps.config.publicBaseUrl);
  return async (ctx, next) => {
    if (!SAFE.has(ctx.method)) {
      const origin = ctx.get('origin');
      if (origin) {
        // Our own origin from protocol and Host (koa 3's ctx.origin echoes the Origin header, so it is not used).
        const own = `${ctx.protocol}://${ctx.host}`;
        if (origin !== own && origin !== configured) throw csrfError('Cross-origin request refused.');
      } else {
        const site = ctx.get('sec-fetch-site');
        if (site && site !== 'same-origin' && site !== 'none') throw csrfError('Cross-site request refused.');
      }
    }
    await next();
  };
}

/** Every state-changing request of a session must carry its CSRF token in X-CSRF-Token (set by the console's JS). */
export function requireCsrf(): Koa.Middleware<GatewayState> {
  return async (ctx, next) => {
    if (!SAFE.has(ctx.method)) {
      const token = (ctx.state as ConsoleState).sessionToken;
      const presented = ctx.get('x-csrf-token');
      if (!token || !presented || !csrfMatches(token, presented))
        throw csrfError('Missing or wrong CSRF token; reload the page.');
    }
    await next();
  };
}

const csrfError = (message: string) => new ApiError(403, message, 'permission_error', null, 'csrf_failed');

function safeOrigin(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return '';
  }
}
