import type { Db } from '../db';
import type { PriceSet, Pricing } from '../catalog';
import { audioCost, charactersCost, imagesCost } from './pricing';
import { breakdownOfUnits, usageCost } from './tokenUsage';
import { videoSecondPrice, type VideoBilled, type VideoDims } from './videoPricing';

/**
 * The invariant of every usage record: its units at the prices of the version it was billed at
 * (usage_records.price_version; a record of no version, at its own usage_records.pricing) come to
 * cost_vnd + shortfall_vnd, and its shortfall is the amount of its `uncollected` ledger event. A record
 * without prices (a failed call, billed nothing, or one written before prices were recorded) cannot be re-priced:
 * those are counted, and those of them that moved money counted apart.
 */

/** What `units` cost at `p`, by the rule each operation is billed with; null for units of no known shape. */
export function unitsCost(p: Pricing, units: Record<string, unknown>): number | null {
  // A response cache hit (src/cache/): the hit price per hit, recorded as its prices.
  if (typeof units.cache_hit === 'number') return units.cache_hit * ((p as { cacheHitVnd?: number }).cacheHitVnd ?? 0);
  const tokens = breakdownOfUnits(units);
  if (tokens)
    return usageCost(p, {
      input: tokens.input_uncached,
      cacheRead: tokens.cache_read,
      cacheWrite5m: tokens.cache_write_5m,
      cacheWrite1h: tokens.cache_write_1h,
      output: tokens.output,
      reasoning: tokens.reasoning,
      audioInput: tokens.audio_input,
      audioOutput: tokens.audio_output,
      estimated: false,
    });
  if (typeof units.images === 'number') return imagesCost(p, units.images);
  if (typeof units.characters === 'number') return charactersCost(p, units.characters);
  if (typeof units.audio_seconds === 'number') return audioCost(p, Math.round(units.audio_seconds * 1000));
  return null;
}

/**
 * The prices a record is re-priced at: those of the price version it names (its batch prices for batch work), so
 * a record is checked against the book, not only against itself; a record of no version, at its own snapshot.
 */
function pricesBilledAt(r: {
  pricing: PriceSet;
  v_pricing: PriceSet | null;
  v_batch_pricing: PriceSet | null;
}): Pricing {
  if (!r.v_pricing) return r.pricing;
  return r.pricing.priceKind === 'batch' ? (r.v_batch_pricing ?? r.v_pricing) : r.v_pricing;
}

export interface UsageMismatch {
  id: string;
  /** `price`: units x prices differ from cost + shortfall; `uncollected`: the shortfall differs from its event. */
  problem: 'price' | 'uncollected';
  costVnd: number;
  shortfallVnd: number;
  /** units x prices (price), or the uncollected event's amount (uncollected). */
  expectedVnd: number | null;
}

export interface UsageVerification {
  checked: number;
  /** Records without prices (not re-priced), and how many of them carry a cost or shortfall. */
  unpriced: number;
  unpricedBilled: number;
  mismatches: UsageMismatch[];
}

const PAGE = 5000;

/**
 * Re-prices every usage record (created at or after `since`, when given) through a server-side cursor, a page at a
 * time, and checks each shortfall against its `uncollected` event. At most `limit` mismatches are returned.
 */
export async function verifyUsage(db: Db, opts: { since?: Date; limit?: number } = {}): Promise<UsageVerification> {
  const limit = opts.limit ?? 1000;
  const since = opts.since ?? null;
  const out: UsageVerification = { checked: 0, unpriced: 0, unpricedBilled: 0, mismatches: [] };
  const c = await db.connect();
  try {
    await c.query('BEGIN READ ONLY');
    await c.query(
      `DECLARE usage_check NO SCROLL CURSOR FOR
       SELECT u.id, u.units, u.cost_vnd, u.shortfall_vnd, u.pricing, pv.pricing AS v_pricing,
              pv.batch_pricing AS v_batch_pricing
       FROM usage_records u LEFT JOIN price_versions pv ON pv.id = u.price_version
       WHERE $1::timestamptz IS NULL OR u.created_at >= $1::timestamptz`,
      [since],
    );
    for (;;) {
      const page = await c.query(`FETCH ${PAGE} FROM usage_check`);
      for (const r of page.rows) {
        out.checked++;
        const cost = Number(r.cost_vnd);
        const shortfall = Number(r.shortfall_vnd);
        if (!r.pricing) {
          out.unpriced++;
          if (cost + shortfall > 0) out.unpricedBilled++;
          continue;
        }
        const expected = unitsCost(pricesBilledAt(r), r.units ?? {});
        if (expected === cost + shortfall) continue;
        if (out.mismatches.length < limit)
          out.mismatches.push({
            id: r.id,
            problem: 'price',
            costVnd: cost,
            shortfallVnd: shortfall,
            expectedVnd: expected,
          });
      }
      if (page.rowCount! < PAGE) break;
    }
    await c.query('CLOSE usage_check');
    // Completed video jobs: the seconds billed at the price of what was delivered, at the job's version.
    const jobs = await c.query(
      `SELECT j.id, j.cost_vnd, j.shortfall_vnd, j.billed, j.pricing, pv.pricing AS v_pricing
       FROM video_jobs j LEFT JOIN price_versions pv ON pv.id = j.price_version
       WHERE j.status = 'completed' AND j.billed IS NOT NULL
         AND ($1::timestamptz IS NULL OR j.created_at >= $1::timestamptz)`,
      [since],
    );
    for (const j of jobs.rows) {
      out.checked++;
      const b = j.billed as VideoBilled;
      const dims = {
        resolution: b.resolution ?? undefined,
        audio: b.audio ?? undefined,
        tier: b.tier ?? undefined,
        input: (b.input ?? undefined) as VideoDims['input'],
      };
      // The whole bill: what was charged plus what could not be collected (the job's shortfall).
      const expected = videoSecondPrice(j.v_pricing ?? j.pricing, dims) * b.seconds;
      const billed = Number(j.cost_vnd) + Number(j.shortfall_vnd ?? 0);
      if (expected !== billed && out.mismatches.length < limit)
        out.mismatches.push({
          id: j.id,
          problem: 'price',
          costVnd: Number(j.cost_vnd),
          shortfallVnd: Number(j.shortfall_vnd ?? 0),
          expectedVnd: expected,
        });
    }
    // Each shortfall (of a usage record or a video job) has its uncollected event of the same amount, and each such
    // event its record.
    const un = await c.query(
      `WITH u AS (SELECT id::text AS id, shortfall_vnd FROM usage_records
                  WHERE shortfall_vnd > 0 AND ($1::timestamptz IS NULL OR created_at >= $1::timestamptz)
                  UNION ALL
                  SELECT id::text, shortfall_vnd FROM video_jobs
                  WHERE shortfall_vnd > 0 AND ($1::timestamptz IS NULL OR created_at >= $1::timestamptz)),
            e AS (SELECT ref_id AS id, amount FROM ledger_events
                  WHERE kind = 'uncollected' AND ($1::timestamptz IS NULL OR created_at >= $1::timestamptz))
       SELECT COALESCE(u.id, e.id) AS id, u.shortfall_vnd, e.amount, r.cost_vnd
       FROM u FULL JOIN e ON e.id = u.id LEFT JOIN usage_records r ON r.id::text = COALESCE(u.id, e.id)
       WHERE u.shortfall_vnd IS DISTINCT FROM e.amount
       LIMIT $2`,
      [since, limit],
    );
    for (const r of un.rows)
      if (out.mismatches.length < limit)
        out.mismatches.push({
          id: r.id,
          problem: 'uncollected',
          costVnd: Number(r.cost_vnd ?? 0),
          shortfallVnd: Number(r.shortfall_vnd ?? 0),
          expectedVnd: r.amount === null ? null : Number(r.amount),
        });
    await c.query('COMMIT');
  } catch (e) {
    await c.query('ROLLBACK').catch(() => undefined);
    throw e;
  } finally {
    c.release();
  }
  return out;
}
