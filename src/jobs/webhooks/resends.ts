import type { Db } from '../../db';
import { tx } from '../../db';
import { ApiError } from '../../errors';
import { prepareResend, type DeliveryRef } from './repo';
import type { DeliveryLimits } from './settings';

/**
 * Resends, limited in Postgres (so across every API process): per account, at most `resendsPerMinute` in any 60 s;
 * per delivery, one per `resendIntervalMs`. A refusal is a 429 with Retry-After: when a resend would be admitted.
 */

const MINUTE_MS = 60_000;

/** 429 `rate_limit_exceeded`, Retry-After in whole seconds (at least 1). */
function tooMany(message: string, retryAfterMs: number): ApiError {
  const secs = Math.max(1, Math.ceil(retryAfterMs / 1000));
  return new ApiError(429, `${message} Try again in ${secs} s.`, 'rate_limit_error', null, 'rate_limit_exceeded', {
    'retry-after': String(secs),
  });
}

/**
 * Counts a resend of the delivery against its limits and makes it pending under a new generation, in one
 * transaction (the caller starts its workflow). Null: no such delivery on this endpoint of the account. Throws the
 * 429 when a limit is reached.
 */
export async function admitResend(
  db: Db,
  limits: Pick<DeliveryLimits, 'resendsPerMinute' | 'resendIntervalMs'>,
  a: { accountId: string; endpointId: string; deliveryId: string },
): Promise<DeliveryRef | null> {
  return tx(db, async (c) => {
    // Resends of one account are counted one at a time.
    await c.query("SELECT pg_advisory_xact_lock(hashtext('webhook-resend'), hashtext($1))", [a.accountId]);
    // The time is read after the lock (not the transaction's start, now()): a resend that began earlier but waited
    // here must not find the one counted before it in its future.
    const at = ((await c.query('SELECT clock_timestamp()::text AS t')).rows[0] as { t: string }).t;
    const keepMs = Math.max(MINUTE_MS, limits.resendIntervalMs);
    await c.query(
      `DELETE FROM webhook_resends
        WHERE account_id = $1 AND at < $3::timestamptz - $2::float8 * interval '1 millisecond'`,
      [a.accountId, keepMs, at],
    );
    const r = await c.query(
      `SELECT
         count(*) FILTER (WHERE at > $5::timestamptz - interval '1 minute')::int AS n,
         (SELECT extract(epoch FROM (x.at + interval '1 minute' - $5::timestamptz)) * 1000 FROM webhook_resends x
            WHERE x.account_id = $1 AND x.at > $5::timestamptz - interval '1 minute'
            ORDER BY x.at DESC OFFSET $4::int - 1 LIMIT 1) AS account_wait_ms,
         extract(epoch FROM (max(at) FILTER (WHERE delivery_id = $2) + $3::float8 * interval '1 millisecond'
           - $5::timestamptz)) * 1000 AS delivery_wait_ms
       FROM webhook_resends WHERE account_id = $1`,
      [a.accountId, a.deliveryId, limits.resendIntervalMs, limits.resendsPerMinute, at],
    );
    const { n, account_wait_ms: accountWait, delivery_wait_ms: deliveryWait } = r.rows[0];
    if (deliveryWait !== null && Number(deliveryWait) > 0)
      throw tooMany(
        `This delivery was resent less than ${limits.resendIntervalMs / 1000} s ago.`,
        Number(deliveryWait),
      );
    if (n >= limits.resendsPerMinute)
      throw tooMany(
        `Too many resends: at most ${limits.resendsPerMinute} per minute per account.`,
        Number(accountWait ?? MINUTE_MS),
      );
    const ref = await prepareResend(c, a.accountId, a.endpointId, a.deliveryId);
    if (ref)
      await c.query('INSERT INTO webhook_resends (account_id, delivery_id, at) VALUES ($1, $2, $3)', [
        a.accountId,
        a.deliveryId,
        at,
      ]);
    return ref;
  });
}
