import type { AppDeps } from '../../operations';
import type { Ctx } from '../requestState';
import { setRateLimitHeaders } from '../../modelCall';

/**
 * After an authenticated request has run (a success or an error alike; errorHandler keeps the headers): gives its
 * response the key's rate-limit headers if its admission did not (src/modelCall/rateLimit.ts). The look at the
 * window counts nothing; a request that was admitted (every billed one) needs no second call to the limiter.
 * Never throws.
 */
export async function addRateLimitHeaders(ctx: Ctx, deps: Pick<AppDeps, 'limiter'>): Promise<void> {
  const p = ctx.state.principal;
  if (!p || ctx.state.rateLimitHeaders || ctx.res.headersSent || (p.limits.rpm === null && p.limits.tpm === null))
    return;
  const view = await deps.limiter.peek(p.keyId, { rpm: p.limits.rpm, tpm: p.limits.tpm });
  ctx.state.rateLimitHeaders = true;
  setRateLimitHeaders(ctx.res, ctx.state.errorShape === 'anthropic', view);
}
