import type { DbClient } from '../db';
import { extendLockedHolds, type LockedHolds } from './ledger';
import { keyBudgetRoom } from './budget';

/**
 * A job's bill above what its hold still covers (the provider reported more work than was reserved) follows the
 * synchronous path's rule (usageBatch.ts): the excess is collected from what the account has free (balance - held)
 * and what its key's budget leaves, by extending the hold; what neither covers is the shortfall, for the caller to
 * record (`uncollected`). The hold must be locked by the caller's transaction (lockHolds: accounts first).
 * Returns the charge the hold now covers and the shortfall; replays (same key) extend nothing twice.
 */
export async function collectAboveHold(
  c: DbClient,
  holds: LockedHolds,
  b: { holdId: string; bill: number; apiKeyId: string | null; idempotencyKey: string; memo: string },
): Promise<{ charge: number; shortfall: number }> {
  const h = holds.get(b.holdId);
  if (!h || h.status !== 'open') return { charge: 0, shortfall: b.bill };
  const remaining = Number(h.remaining);
  const excess = b.bill - remaining;
  if (excess <= 0) return { charge: b.bill, shortfall: 0 };
  const free = await c.query('SELECT balance - held AS free FROM accounts WHERE id = $1', [h.account_id]);
  let take = Math.min(excess, Math.max(0, Number(free.rows[0]?.free ?? 0)));
  const keyId = h.api_key_id ?? b.apiKeyId;
  if (keyId && take > 0) {
    const room = (await keyBudgetRoom(c, keyId))?.room ?? null;
    if (room != null) take = Math.min(take, Math.max(0, room));
  }
  if (take > 0)
    await extendLockedHolds(c, holds, [
      { holdId: b.holdId, amount: take, idempotencyKey: b.idempotencyKey, memo: b.memo },
    ]);
  return { charge: remaining + take, shortfall: excess - take };
}
