import type { Queryable } from '../../db';
import { usageIdOf } from './repo';

/**
 * verify-ledger's check of background responses (docs/background-responses.md, "Money"): the customer pays once,
 * for the attempt whose output was stored; what the provider billed for lost attempts is the gateway's cost, never
 * the customer's. For each final response:
 *  - `attempt_open`: every attempt is closed, the stored one `stored`, the others `lost` with their gateway cost
 *    (an attempt left open is a lost attempt without its gateway-cost record) or `replayed` (it called no upstream:
 *    it ended the response from the stored one's answer);
 *  - `stored_twice`: at most one attempt stored the answer (one bill);
 *  - `charge`: what the ledger charged from the response's hold (plus what it left uncollected) equals the
 *    response's `cost_vnd` and the cost of its one usage record (id derived from the response's): no other charge,
 *    so no lost attempt was charged to the customer;
 *  - `hold_open`: its hold is closed.
 * The totals: responses, attempts lost, their gateway cost, and the customers' charges of the same responses.
 */

export interface BackgroundMismatch {
  responseId: string;
  problem: 'attempt_open' | 'stored_twice' | 'charge' | 'hold_open';
  detail: string;
}

export interface BackgroundVerification {
  /** Final background responses checked. */
  responses: number;
  attemptsLost: number;
  /** What the lost attempts cost the gateway (VND, estimated): recorded, never charged. */
  lostGatewayCostVnd: number;
  /** What the customers were charged for these responses (VND, from the ledger). */
  chargedVnd: number;
  mismatches: BackgroundMismatch[];
}

export async function verifyBackgroundResponses(
  db: Queryable,
  opts: { since?: Date; limit?: number } = {},
): Promise<BackgroundVerification> {
  const limit = opts.limit ?? 1000;
  const r = await db.query(
    `SELECT b.id, b.cost_vnd, b.usage_id, h.status AS hold_status,
            a.open_attempts, a.stored_attempts, a.lost_attempts, a.lost_cost,
            COALESCE(l.charged, 0)::bigint AS charged,
            u.cost_vnd AS usage_cost, u.shortfall_vnd AS usage_shortfall
     FROM background_responses b
     LEFT JOIN holds h ON h.id = b.hold_id
     LEFT JOIN LATERAL (
       SELECT count(*) FILTER (WHERE ended_at IS NULL)::int AS open_attempts,
              count(*) FILTER (WHERE outcome = 'stored')::int AS stored_attempts,
              count(*) FILTER (WHERE outcome = 'lost')::int AS lost_attempts,
              COALESCE(sum(gateway_cost_vnd) FILTER (WHERE outcome = 'lost'), 0)::bigint AS lost_cost
       FROM background_response_attempts WHERE response_id = b.id) a ON true
     LEFT JOIN LATERAL (
       SELECT sum(amount) AS charged FROM ledger_events
       WHERE hold_id = b.hold_id AND kind = 'charged') l ON true
     LEFT JOIN usage_records u ON u.id = b.usage_id
     WHERE b.status NOT IN ('queued', 'in_progress') AND ($1::timestamptz IS NULL OR b.created_at >= $1)`,
    [opts.since ?? null],
  );
  const out: BackgroundVerification = {
    responses: 0,
    attemptsLost: 0,
    lostGatewayCostVnd: 0,
    chargedVnd: 0,
    mismatches: [],
  };
  const report = (m: BackgroundMismatch) => {
    if (out.mismatches.length < limit) out.mismatches.push(m);
  };
  for (const x of r.rows) {
    const id = x.id as string;
    const cost = Number(x.cost_vnd ?? 0);
    const charged = Number(x.charged);
    out.responses++;
    out.attemptsLost += x.lost_attempts;
    out.lostGatewayCostVnd += Number(x.lost_cost);
    out.chargedVnd += charged;
    if (x.open_attempts > 0)
      report({ responseId: id, problem: 'attempt_open', detail: `${x.open_attempts} attempt(s) never closed` });
    if (x.stored_attempts > 1)
      report({ responseId: id, problem: 'stored_twice', detail: `${x.stored_attempts} attempts stored its answer` });
    // The one bill: the usage record of the response's own id, charged from its hold, nothing else.
    const usageCost = x.usage_id === null ? 0 : Number(x.usage_cost ?? NaN);
    const badUsage = x.usage_id !== null && x.usage_id !== usageIdOf(id);
    if (badUsage || charged !== cost || usageCost !== cost)
      report({
        responseId: id,
        problem: 'charge',
        detail:
          `cost_vnd ${cost}, ledger charged ${charged} from its hold, usage record ` +
          (x.usage_id === null ? 'none' : `${x.usage_id}${badUsage ? ' (not its own)' : ''} cost ${x.usage_cost}`),
      });
    if (x.hold_status !== 'closed')
      report({ responseId: id, problem: 'hold_open', detail: `its hold is ${x.hold_status ?? 'missing'}` });
  }
  return out;
}
