import type { AppDeps } from './deps';
import type { Ctx } from './middleware';
import { openMeter, type Meter } from '../billing/meter';
import { hasBudget } from '../limits/keyLimits';
import { admitRequest, unitTokens } from './rateLimit';
import { ApiError } from '../errors';
import type { Principal } from '../auth/apiKeys';

/**
 * The request's key settings, read again when older than KEY_CACHE_MS (a request that spent long before reserving,
 * e.g. uploading): whether the key may reserve from its account's shared lease is decided on settings no older
 * than that, which is what lets the ledger's budget fence (migration 074) count every such lease.
 */
async function currentPrincipal(ctx: Ctx, deps: Pick<AppDeps, 'keys'>): Promise<Principal> {
  const p = ctx.state.principal!;
  if (!deps.keys.isStale(p)) return p;
  const fresh = await deps.keys.refresh(p);
  if (!fresh) throw new ApiError(401, 'This API key was revoked.', 'invalid_request_error', null, 'invalid_api_key');
  ctx.state.principal = fresh;
  return fresh;
}

/**
 * Checks the key's rate limits (429, nothing reserved), reserves a request's maximum cost (402 when the account,
 * or the key's budget, cannot cover it) and registers the meter on the request, so that errorHandler cancels it if
 * anything throws before it is settled: a reservation is never stranded by an error path a router did not foresee
 * (an unknown provider, a translation error, a thrown bug). `maxTokens` is the request's input + output token bound
 * (0 for operations not billed in tokens); the key's TPM window is corrected to the actual tokens at settlement.
 */
export async function reserve(
  ctx: Ctx,
  deps: Pick<AppDeps, 'credit' | 'limiter' | 'metrics' | 'keys'>,
  model: string,
  operation: string,
  maxCostVnd: number,
  maxTokens = 0,
): Promise<Meter> {
  const p = await currentPrincipal(ctx, deps);
  const ticket = await admitRequest(ctx, deps, maxTokens);
  let meter: Meter;
  try {
    meter = await openMeter(
      deps.credit,
      {
        accountId: p.accountId,
        keyId: p.keyId,
        budgetKeyId: hasBudget(p.limits) ? p.keyId : null,
        budgetFenceAt: p.budgetFenceAt,
      },
      model,
      operation,
      maxCostVnd,
    );
  } catch (e) {
    if (ticket) deps.limiter.settle(ticket, 0); // refused for money: no tokens used
    if ((e as { code?: unknown } | null)?.code === 'budget_exceeded')
      deps.metrics.limitRefusals.inc({ limit: 'budget' });
    throw e;
  }
  if (ticket) meter.onFinish = (units) => deps.limiter.settle(ticket, unitTokens(units));
  ctx.state.meter = meter;
  return meter;
}
