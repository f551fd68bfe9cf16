import type { Pricing } from '../catalog/catalog';
import { usageCost, usageUnits, type TokenUsage } from '../billing/tokenUsage';

/**
 * A succeeded batch item's answer and bill: its cost is its units at `pricing` (the answering model's batch prices),
 * and its usage record keeps `pricing` so that verify-ledger re-prices it.
 */
export interface ItemBill {
  body: unknown;
  cost: number;
  units: Record<string, number>;
  pricing: Pricing;
}

export const billed = (body: unknown, pricing: Pricing, usage: TokenUsage): ItemBill => ({
  body,
  cost: usageCost(pricing, usage),
  units: usageUnits(usage),
  pricing,
});
