import type { Db, Queryable } from '../../db';
import { tx } from '../../db';
import { recordEventIn, type DeliveryRef } from '../../webhooks/repo';

/**
 * Low-balance alerts: an account sets a threshold (VND); when its balance falls below it, the signed webhook event
 * `balance.low` is emitted once for that crossing, and armed again once the balance is back at or above it (a
 * top-up). The worker's sweep finds the crossings (every VIDEO_RECONCILE_INTERVAL_MS); each is recorded with its
 * event in one transaction, keyed on the account's crossing number, so a sweep run twice emits nothing twice.
 */

export async function lowBalanceThreshold(db: Queryable, accountId: string): Promise<number | null> {
  const r = await db.query('SELECT low_balance_threshold FROM accounts WHERE id = $1', [accountId]);
  return r.rows[0]?.low_balance_threshold ?? null;
}

/** Sets (or, with null, clears) the threshold; the next crossing below it is announced. */
export async function setLowBalanceThreshold(db: Queryable, accountId: string, threshold: number | null) {
  await db.query(
    `UPDATE accounts SET low_balance_threshold = $2,
       low_balance_alerted = CASE WHEN $2::bigint IS NULL THEN false ELSE low_balance_alerted END WHERE id = $1`,
    [accountId, threshold],
  );
}

/** Arms the accounts back above their threshold, records a `balance.low` for those newly below. */
export async function sweepLowBalances(db: Db): Promise<DeliveryRef[]> {
  return tx(db, async (c) => {
    await c.query(
      `UPDATE accounts SET low_balance_alerted = false
       WHERE low_balance_alerted AND (low_balance_threshold IS NULL OR balance >= low_balance_threshold)`,
    );
    const crossed = await c.query(
      `UPDATE accounts SET low_balance_alerted = true, low_balance_crossings = low_balance_crossings + 1
       WHERE NOT low_balance_alerted AND low_balance_threshold IS NOT NULL AND balance < low_balance_threshold
       RETURNING id, balance, low_balance_threshold, low_balance_crossings`,
    );
    const out: DeliveryRef[] = [];
    for (const a of crossed.rows) {
      const { deliveries } = await recordEventIn(c, {
        accountId: a.id,
        type: 'balance.low',
        data: { account_id: a.id, balance: a.balance, threshold: a.low_balance_threshold, currency: 'vnd' },
        key: `balance.low:${a.id}:${a.low_balance_crossings}`,
      });
      out.push(...deliveries);
    }
    return out;
  });
}
