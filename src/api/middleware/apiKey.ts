import type Koa from 'koa';
import { ApiError } from '../../errors';
import type { AppDeps } from '../../operations';
import { ADMIN_KEY_PREFIX } from '../../auth';
import type { Ctx, GatewayState } from '../requestState';
import { addRateLimitHeaders } from './rateLimitHeaders';

/** Reads the API key from `Authorization: Bearer` or `x-api-key`; 401 in the route's error shape otherwise. */
export async function authenticate(ctx: Ctx, keys: AppDeps['keys'], adminKeys?: AppDeps['adminKeys']): Promise<void> {
  const auth = ctx.get('authorization');
  let key = '';
  if (auth) {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(auth);
    key = m ? m[1] : '';
  }
  if (!key) key = ctx.get('x-api-key').trim();
  // The Gemini API's two ways: the x-goog-api-key header, or ?key= (its routes only, so no other URL carries keys).
  if (!key && ctx.state.errorShape === 'gemini')
    key = ctx.get('x-goog-api-key').trim() || (typeof ctx.query.key === 'string' ? ctx.query.key : '');
  if (!key)
    throw new ApiError(
      401,
      'You did not provide an API key. Send it as Authorization: Bearer <key> (or x-api-key).',
      'invalid_request_error',
      null,
      'missing_api_key',
    );
  // An organization's admin key manages and never calls models: a 403 that says so (a made-up one is a 401).
  if (adminKeys && key.startsWith(ADMIN_KEY_PREFIX) && (await adminKeys.resolve(key)))
    throw new ApiError(
      403,
      'Admin API keys manage the organization (/v1/organization/*) and cannot call models: use a project API key.',
      'invalid_request_error',
      null,
      'project_key_required',
    );
  const p = await keys.resolve(key);
  if (!p) throw new ApiError(401, 'Incorrect API key provided.', 'invalid_request_error', null, 'invalid_api_key');
  if (p.expiresAt !== null && Date.now() >= p.expiresAt) {
    throw new ApiError(
      401,
      `This API key expired at ${new Date(p.expiresAt).toISOString()}.`,
      'invalid_request_error',
      null,
      'expired_api_key',
    );
  }
  ctx.state.principal = p;
}

/** Authenticates, then runs the route; its response carries the key's rate-limit headers (operations/rateLimit.ts). */
export function requireApiKey(deps: Pick<AppDeps, 'keys' | 'limiter' | 'adminKeys'>): Koa.Middleware<GatewayState> {
  return async (ctx, next) => {
    await authenticate(ctx, deps.keys, deps.adminKeys);
    try {
      await next();
    } finally {
      await addRateLimitHeaders(ctx, deps);
    }
  };
}
