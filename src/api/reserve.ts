import type { AppDeps } from './deps';
import type { Ctx } from './middleware';
import { openMeter, type Meter } from '../billing/meter';

/**
 * Reserves a request's maximum cost (402 when the account cannot cover it) and registers the meter on the request,
 * so that errorHandler cancels it if anything throws before it is settled: a reservation is never stranded by an
 * error path a router did not foresee (an unknown provider, a translation error, a thrown bug).
 */
export async function reserve(ctx: Ctx, deps: Pick<AppDeps, 'credit'>, model: string, operation: string, maxCostVnd: number): Promise<Meter> {
  const p = ctx.state.principal!;
  const meter = await openMeter(deps.credit, { accountId: p.accountId, keyId: p.keyId }, model, operation, maxCostVnd);
  ctx.state.meter = meter;
  return meter;
}
