import type { Catalog, Pricing, ProviderConfig, ProviderKind } from '../catalog/catalog';
import { KINDS, PROVIDER_KINDS, type KindRow } from '../providers/kinds';
import type { UsageReports } from '../providers/usageReports';
import type { Db } from '../db/pool';
import { tx } from '../db/pool';
import { breakdownOfUnits } from '../billing/tokenUsage';

/**
 * Reconciliation of one provider's day (docs/billing.md, "Reconciliation"): the provider's own usage report
 * (OpenAI's organization usage API, Anthropic's usage report) against the gateway's usage records of calls it sent
 * to that provider, per upstream model and token field; the drift is stored (reconciliation_drift). Providers of
 * other kinds have no such report the gateway reads yet: they are listed as not reconciled.
 */

export const FIELDS = ['input', 'cache_read', 'cache_write_5m', 'cache_write_1h', 'output'] as const;
export type Field = (typeof FIELDS)[number];
type Units = Record<Field, number>;

/** The report each kind the gateway reads none of would be read from (its row's `reports`; docs/billing.md). */
export const NOT_RECONCILED: Partial<Record<ProviderKind, string>> = Object.fromEntries(
  PROVIDER_KINDS.flatMap((k) => {
    const reports: KindRow['reports'] = KINDS[k].reports;
    return typeof reports === 'string' ? [[k, reports]] : [];
  }),
);

/** The reader of the provider's own reports, if the gateway reads them. */
function readerOf(p: ProviderConfig): UsageReports | null {
  const reports: KindRow['reports'] = KINDS[p.kind].reports;
  return typeof reports === 'string' ? null : reports;
}

export const isReconciled = (p: ProviderConfig) => readerOf(p) !== null;

const round4 = (x: number) => Math.round(x * 10_000) / 10_000;
const zero = (): Units => ({ input: 0, cache_read: 0, cache_write_5m: 0, cache_write_1h: 0, output: 0 });
const DAY_MS = 86_400_000;

/** The UTC day as YYYY-MM-DD. */
export const dayOf = (d: Date) => d.toISOString().slice(0, 10);

/** The key a usage report is read with: `<apiKeyEnv>_ADMIN` (providers' usage APIs take an admin key), else its key. */
function reportKey(p: ProviderConfig, env: NodeJS.ProcessEnv): string {
  return (p.apiKeyEnv && env[`${p.apiKeyEnv}_ADMIN`]) || p.apiKey || '';
}

/** The provider's own report of the day: units by upstream model. */
export async function providerReport(
  p: ProviderConfig,
  day: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<Map<string, Units>> {
  const start = Date.parse(`${day}T00:00:00Z`);
  const out = new Map<string, Units>();
  const add = (model: string, u: Partial<Units>) => {
    const t = out.get(model) ?? zero();
    for (const f of FIELDS) t[f] += u[f] ?? 0;
    out.set(model, t);
  };
  const reader = readerOf(p);
  if (!reader) throw new Error(`provider ${p.id} (${p.kind}) has no usage report the gateway reads`);
  await reader.usage(p.baseUrl, reportKey(p, env), { start, end: start + DAY_MS }, add);
  return out;
}

/** The provider's cost report of the day: USD by upstream model and field. */
export async function providerCosts(
  p: ProviderConfig,
  day: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<Map<string, Units>> {
  const start = Date.parse(`${day}T00:00:00Z`);
  const out = new Map<string, Units>();
  const add = (model: string, field: Field | undefined, usd: number) => {
    if (!field || !Number.isFinite(usd)) return;
    const t = out.get(model) ?? zero();
    t[field] += usd;
    out.set(model, t);
  };
  await readerOf(p)?.costs(p.baseUrl, reportKey(p, env), { start, end: start + DAY_MS }, add);
  return out;
}

/** The gateway's record of the day's upstream usage on provider `p`: units and VND charged by upstream model. */
export async function recordedUsage(
  db: Db,
  catalog: Catalog,
  providerId: string,
  day: string,
): Promise<Map<string, { units: Units; charged: Units }>> {
  const r = await db.query(
    `SELECT model, deployment, units, pricing FROM usage_records
     WHERE created_at >= $1::date AND created_at < $1::date + 1 AND status < 400`,
    [day],
  );
  const deployments = new Map(catalog.allDeployments().map((d) => [d.id, d] as const));
  const out = new Map<string, { units: Units; charged: Units }>();
  for (const row of r.rows) {
    const m = catalog.get(row.model);
    const d = (row.deployment && deployments.get(row.deployment)) || (m ? catalog.deployments(m)[0] : undefined);
    if (!d || d.provider !== providerId) continue;
    const t = breakdownOfUnits(row.units ?? {});
    if (!t) continue;
    const acc = out.get(d.upstreamModel) ?? { units: zero(), charged: zero() };
    const units: Units = {
      input: t.input_uncached,
      cache_read: t.cache_read,
      cache_write_5m: t.cache_write_5m,
      cache_write_1h: t.cache_write_1h,
      output: t.output,
    };
    // Each field at the price the record was billed at (its version's snapshot), in VND before rounding.
    const p = (row.pricing ?? {}) as Pricing;
    const price: Units = {
      input: p.inputPer1MTokens ?? 0,
      cache_read: p.cachedInputPer1MTokens ?? p.inputPer1MTokens ?? 0,
      cache_write_5m: p.cacheWrite5mPer1MTokens ?? p.inputPer1MTokens ?? 0,
      cache_write_1h: p.cacheWrite1hPer1MTokens ?? p.inputPer1MTokens ?? 0,
      output: p.outputPer1MTokens ?? 0,
    };
    for (const f of FIELDS) {
      acc.units[f] += units[f];
      acc.charged[f] += (units[f] * price[f]) / 1_000_000;
    }
    out.set(d.upstreamModel, acc);
  }
  return out;
}

export interface DriftRow {
  model: string;
  field: Field;
  reported: number;
  recorded: number;
  drift: number;
  /** What the provider billed for the field, in VND; what customers were charged for it. */
  reportedCostVnd: number;
  chargedVnd: number;
}

/** VND per USD the provider's costs are converted at (RECONCILE_USD_VND, default 26 000). */
export const usdVndOf = (env: NodeJS.ProcessEnv = process.env) => Number(env.RECONCILE_USD_VND ?? 26_000);

/** Reconciles provider `providerId` for UTC `day` and stores the drift (replacing that day's rows). */
export async function reconcileProviderDay(
  deps: { db: Db; catalog: Catalog; env?: NodeJS.ProcessEnv },
  providerId: string,
  day: string,
): Promise<DriftRow[]> {
  const p = deps.catalog.providers.get(providerId);
  if (!p) throw new Error(`unknown provider ${providerId}`);
  const [reported, costs, recorded] = [
    await providerReport(p, day, deps.env),
    await providerCosts(p, day, deps.env),
    await recordedUsage(deps.db, deps.catalog, providerId, day),
  ];
  const rate = usdVndOf(deps.env);
  const rows: DriftRow[] = [];
  for (const model of new Set([...reported.keys(), ...recorded.keys()])) {
    const rep = reported.get(model) ?? zero();
    const rec = recorded.get(model) ?? { units: zero(), charged: zero() };
    const cost = costs.get(model) ?? zero();
    for (const field of FIELDS) {
      if (rep[field] === 0 && rec.units[field] === 0) continue;
      rows.push({
        model,
        field,
        reported: rep[field],
        recorded: rec.units[field],
        drift: rep[field] - rec.units[field],
        reportedCostVnd: round4(cost[field] * rate),
        chargedVnd: round4(rec.charged[field]),
      });
    }
  }
  await tx(deps.db, async (c) => {
    await c.query('DELETE FROM reconciliation_drift WHERE provider = $1 AND day = $2', [providerId, day]);
    for (const r of rows)
      await c.query(
        `INSERT INTO reconciliation_drift
           (provider, day, model, field, reported, recorded, drift, reported_cost_vnd, charged_vnd)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
        [providerId, day, r.model, r.field, r.reported, r.recorded, r.drift, r.reportedCostVnd, r.chargedVnd],
      );
  });
  return rows;
}
