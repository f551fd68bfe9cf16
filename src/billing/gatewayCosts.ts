import type { Pricing } from '../catalog';
import type { Queryable, Querier } from '../db';

/**
 * The gateway's own costs (migration 185, docs/billing.md "The gateway's own costs"): what a provider billed for a
 * call, or a task, that no customer is charged for, each recorded once (its key) with its cause, the attempt that
 * sent it and the deployment that served it. The one place such a cost is written; verify-ledger totals them and
 * reconciliation counts their units as explained drift.
 */

export const GATEWAY_COST_CAUSES = [
  /** A batch line in flight on a worker that died: not sent again, uncharged (request_interrupted). Estimated. */
  'batch_line_interrupted',
  /** A batch line answered after its batch was ended elsewhere: its chunk commits nothing. */
  'batch_line_after_end',
  /** A background-response attempt whose answer was not the one charged (its worker died, or it came too late). */
  'background_attempt_lost',
  /** A video task that outlived its job (the provider could not cancel it), followed to its end. */
  'video_task_uncancelled',
  /** A duplicate video task a timed-out submit created (src/video/twins.ts). */
  'video_twin',
] as const;
export type GatewayCostCause = (typeof GATEWAY_COST_CAUSES)[number];

export interface GatewayCost {
  /** Unique: a second record of the same call is ignored. */
  key: string;
  cause: GatewayCostCause;
  refType: 'batch' | 'background_response' | 'video_job';
  refId: string;
  /** The usage record id it would have been charged under (a batch line's), if any. */
  usageId?: string | null;
  accountId?: string | null;
  attempt?: string | number | null;
  model: string;
  deployment?: string | null;
  units: Record<string, number>;
  costVnd: number;
  pricing?: Pricing | null;
  estimated: boolean;
}

/** The columns of a gateway cost, in the order of INSERT_SQL's parameters. */
export function gatewayCostParams(g: GatewayCost): unknown[] {
  return [
    g.key,
    g.cause,
    g.refType,
    g.refId,
    g.usageId ?? null,
    g.accountId ?? null,
    g.attempt === null || g.attempt === undefined ? null : String(g.attempt),
    g.model,
    g.deployment ?? null,
    JSON.stringify(g.units),
    Math.max(0, Math.ceil(g.costVnd)),
    g.pricing ? JSON.stringify(g.pricing) : null,
    g.estimated,
  ];
}

const INSERT_SQL = `INSERT INTO gateway_costs (key, cause, ref_type, ref_id, usage_id, account_id, attempt, model,
    deployment, units, cost_vnd, pricing, estimated)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) ON CONFLICT (key) DO NOTHING`;

/**
 * Records `g` in the same statement as the change that makes the call the gateway's (a data-modifying query that
 * returns a row when it applied, with columns `attempt` and `deployment`, text or null, which take precedence over
 * g's): both or neither, whatever the caller's transaction. True when the change applied.
 */
export async function recordGatewayCostWith(
  db: Querier,
  change: { sql: string; params: unknown[] },
  g: GatewayCost,
): Promise<boolean> {
  const n = change.params.length;
  const p = gatewayCostParams(g).map((_, i) => `$${n + i + 1}`);
  const r = await db.query(
    `WITH change AS (${change.sql}),
     cost AS (INSERT INTO gateway_costs (key, cause, ref_type, ref_id, usage_id, account_id, attempt, model,
                deployment, units, cost_vnd, pricing, estimated)
              SELECT ${p[0]}, ${p[1]}, ${p[2]}, ${p[3]}, ${p[4]}::uuid, ${p[5]}::uuid,
                COALESCE(change.attempt::text, ${p[6]}), ${p[7]}, COALESCE(change.deployment::text, ${p[8]}),
                ${p[9]}::jsonb, ${p[10]}::bigint, ${p[11]}::jsonb, ${p[12]}::boolean
              FROM change ON CONFLICT (key) DO NOTHING)
     SELECT count(*)::int AS n FROM change`,
    [...change.params, ...gatewayCostParams(g)],
  );
  return r.rows[0].n > 0;
}

/** Records a gateway cost once: false when its key was recorded before (a retry). */
export async function recordGatewayCost(db: Querier, g: GatewayCost): Promise<boolean> {
  const r = await db.query(INSERT_SQL, gatewayCostParams(g));
  return r.rowCount === 1;
}

export interface GatewayCostTotals {
  /** Per cause: how many, what they cost the gateway (VND), how many of them are estimates. */
  byCause: Record<string, { count: number; costVnd: number; estimated: number }>;
  count: number;
  costVnd: number;
  /** Gateway costs of a call a customer was charged for too (its usage record exists): counted twice. */
  chargedToo: { key: string; cause: string; usageId: string }[];
}

/** verify-ledger's totals of the gateway's own costs (created since `since`), and any also charged to a customer. */
export async function gatewayCostTotals(
  db: Queryable,
  opts: { since?: Date; limit?: number } = {},
): Promise<GatewayCostTotals> {
  const since = opts.since ?? null;
  const r = await db.query(
    `SELECT cause, count(*)::int AS n, COALESCE(sum(cost_vnd), 0)::bigint AS vnd,
            count(*) FILTER (WHERE estimated)::int AS est
     FROM gateway_costs WHERE ($1::timestamptz IS NULL OR created_at >= $1) GROUP BY cause ORDER BY cause`,
    [since],
  );
  // A batch line is either charged (its usage record) or the gateway's cost, never both; a background attempt that
  // is a gateway cost is never the attempt whose answer was charged.
  const twice = await db.query(
    `SELECT g.key, g.cause, g.usage_id FROM gateway_costs g JOIN usage_records u ON u.id = g.usage_id
     WHERE ($1::timestamptz IS NULL OR g.created_at >= $1)
     UNION ALL
     SELECT g.key, g.cause, NULL FROM gateway_costs g JOIN background_response_attempts a
       ON g.ref_type = 'background_response' AND a.response_id = g.ref_id AND a.attempt::text = g.attempt
     WHERE a.outcome <> 'lost' AND ($1::timestamptz IS NULL OR g.created_at >= $1)
     LIMIT $2`,
    [since, opts.limit ?? 1000],
  );
  const out: GatewayCostTotals = { byCause: {}, count: 0, costVnd: 0, chargedToo: [] };
  for (const x of r.rows) {
    out.byCause[x.cause] = { count: x.n, costVnd: Number(x.vnd), estimated: x.est };
    out.count += x.n;
    out.costVnd += Number(x.vnd);
  }
  out.chargedToo = twice.rows.map((x) => ({ key: x.key, cause: x.cause, usageId: x.usage_id }));
  return out;
}
