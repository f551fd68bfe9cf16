import { batchPricingOf, type ModelConfig } from '../../catalog';
import type { GatewayCost } from '../../billing';
import { estimatedUsage, tokenUsage, usageCost, usageUnits } from '../../billing';
import type { ItemUsage } from './repo';

/**
 * The gateway's own cost of a batch line no customer is charged for (src/billing/gatewayCosts.ts), at the prices
 * the line would have been charged at (the model's batch prices). One key per line, whatever the cause, so a line
 * is recorded once: a line interrupted (its worker died with the request in flight) and answered after all by the
 * attempt that was thought dead is still one call.
 */

export const lineCostKey = (usageId: string) => `batch-line:${usageId}`;

/** The output a request allowed itself (its own cap), for an estimate of what it was answered with. */
function outputCap(body: Record<string, unknown>): number {
  for (const k of ['max_completion_tokens', 'max_tokens', 'max_output_tokens']) {
    const v = body[k];
    if (typeof v === 'number' && Number.isFinite(v) && v > 0) return Math.ceil(v);
  }
  return 0;
}

/**
 * A line in flight on a worker that died (request_interrupted): the request may have reached the provider and is
 * not sent again, so what it cost is estimated from the request: its bytes / 4 as input tokens, its own output cap
 * as output tokens (none stated: none counted).
 */
export function interruptedLineCost(a: {
  batchId: string;
  accountId: string;
  usageId: string;
  model: ModelConfig;
  body: Record<string, unknown>;
  bodyBytes: number;
}): GatewayCost {
  const usage = tokenUsage({ ...estimatedUsage(a.bodyBytes, 0), output: outputCap(a.body) });
  const pricing = batchPricingOf(a.model);
  return {
    key: lineCostKey(a.usageId),
    cause: 'batch_line_interrupted',
    refType: 'batch',
    refId: a.batchId,
    usageId: a.usageId,
    accountId: a.accountId,
    model: a.model.id,
    units: usageUnits(usage),
    costVnd: usageCost(pricing, usage),
    pricing,
    estimated: true,
  };
}

/** A line answered after its batch was ended elsewhere: its chunk commits no charge; the upstream's own usage. */
export function afterEndLineCost(
  b: { batchId: string; accountId: string },
  item: ItemUsage,
  attempt: string | null,
): GatewayCost {
  return {
    key: lineCostKey(item.usage.id),
    cause: 'batch_line_after_end',
    refType: 'batch',
    refId: b.batchId,
    usageId: item.usage.id,
    accountId: b.accountId,
    attempt,
    model: item.usage.model,
    deployment: item.usage.deployment ?? null,
    units: item.usage.units,
    costVnd: item.cost,
    pricing: item.usage.pricing,
    estimated: item.usage.units.estimated === 1,
  };
}
