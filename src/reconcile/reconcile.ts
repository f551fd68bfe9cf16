import type { Catalog, Pricing, ProviderConfig, ProviderKind } from '../catalog/catalog';
import { KINDS, PROVIDER_KINDS, type KindRow } from '../providers/kinds';
import { REPORT_FIELDS, type ReportField, type UsageReports } from '../providers/usageReports';
import type { Db } from '../db/pool';
import { tx } from '../db/pool';
import { breakdownOfUnits } from '../billing/tokenUsage';

/**
 * Reconciliation of one provider's day (docs/billing.md, "Reconciliation"): the provider's own usage report
 * (OpenAI's organization usage API, Anthropic's usage report) against the gateway's usage records of calls it sent
 * to that provider, per upstream model and field (tokens by kind; images; speech characters; transcription
 * seconds); the drift is stored (reconciliation_drift). Providers of other kinds have no such report the gateway
 * reads yet: they are listed as not reconciled.
 */

export const FIELDS = REPORT_FIELDS;
export type Field = ReportField;
type Units = Record<Field, number>;

/** The report each kind the gateway reads none of would be read from (its row's `reports`; docs/billing.md). */
export const NOT_RECONCILED: Partial<Record<ProviderKind, string>> = Object.fromEntries(
  PROVIDER_KINDS.flatMap((k) => {
    const reports: KindRow['reports'] = KINDS[k].reports;
    return typeof reports === 'string' ? [[k, reports]] : [];
  }),
);

/** The fields the provider's reports carry (none when the gateway reads no report of its kind). */
export function reportedFields(p: ProviderConfig): readonly Field[] {
  return readerOf(p)?.fields ?? [];
}

/** The reader of the provider's own reports, if the gateway reads them. */
function readerOf(p: ProviderConfig): UsageReports | null {
  const reports: KindRow['reports'] = KINDS[p.kind].reports;
  return typeof reports === 'string' ? null : reports;
}

export const isReconciled = (p: ProviderConfig) => readerOf(p) !== null;

const round4 = (x: number) => Math.round(x * 10_000) / 10_000;
const zero = (): Units => Object.fromEntries(FIELDS.map((f) => [f, 0])) as Units;
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

/** Usage records read a page at a time (a day may hold millions); `progress` is called after each page. */
const PAGE = 5000;

/** A usage record's upstream units by field; null for units of no reconciled shape. */
function unitsOf(u: Record<string, unknown>): { units: Partial<Units>; exact: Partial<Units> } | null {
  const t = breakdownOfUnits(u);
  if (t) {
    const units = {
      input: t.input_uncached,
      cache_read: t.cache_read,
      cache_write_5m: t.cache_write_5m,
      cache_write_1h: t.cache_write_1h,
      output: t.output,
    };
    return { units, exact: units };
  }
  if (typeof u.images === 'number') return { units: { images: u.images }, exact: { images: u.images } };
  if (typeof u.characters === 'number')
    return { units: { characters: u.characters }, exact: { characters: u.characters } };
  // Transcription seconds: the provider bills each request in whole seconds (rounded up); charged at the exact ones.
  if (typeof u.audio_seconds === 'number')
    return { units: { seconds: Math.ceil(u.audio_seconds) }, exact: { seconds: u.audio_seconds } };
  return null;
}

/** The price of one unit of each field at `p`, in VND. */
function unitPrices(p: Pricing): Units {
  return {
    input: (p.inputPer1MTokens ?? 0) / 1_000_000,
    cache_read: (p.cachedInputPer1MTokens ?? p.inputPer1MTokens ?? 0) / 1_000_000,
    cache_write_5m: (p.cacheWrite5mPer1MTokens ?? p.inputPer1MTokens ?? 0) / 1_000_000,
    cache_write_1h: (p.cacheWrite1hPer1MTokens ?? p.inputPer1MTokens ?? 0) / 1_000_000,
    output: (p.outputPer1MTokens ?? 0) / 1_000_000,
    images: p.perImage ?? 0,
    characters: (p.per1KChars ?? 0) / 1000,
    seconds: (p.perAudioMinute ?? 0) / 60,
  };
}

/** The gateway's record of the day's upstream usage on provider `p`: units and VND charged by upstream model. */
export async function recordedUsage(
  db: Db,
  catalog: Catalog,
  providerId: string,
  day: string,
  progress: () => void = () => {},
): Promise<Map<string, { units: Units; charged: Units }>> {
  const deployments = new Map(catalog.allDeployments().map((d) => [d.id, d] as const));
  const out = new Map<string, { units: Units; charged: Units }>();
  const c = await db.connect();
  try {
    await c.query('BEGIN READ ONLY');
    // The UTC day as instants: `$1::date` compared with a timestamptz would be the session time zone's day. Every
    // call the upstream served counts, whatever the answer's status: a stream the client left (499) or the upstream
    // cut (502) is billed (it has prices) and on the provider's bill too; a call billed nothing has none.
    const start = Date.parse(`${day}T00:00:00Z`);
    await c.query(
      `DECLARE reconcile_day NO SCROLL CURSOR FOR
       SELECT model, deployment, units, pricing FROM usage_records
       WHERE created_at >= $1::timestamptz AND created_at < $2::timestamptz
         AND (status < 400 OR pricing IS NOT NULL)
         AND NOT (units ? 'cache_hit') -- a response cache hit called no provider: nothing on its bill`,
      [new Date(start).toISOString(), new Date(start + DAY_MS).toISOString()],
    );
    for (;;) {
      const page = await c.query(`FETCH ${PAGE} FROM reconcile_day`);
      for (const row of page.rows) {
        const m = catalog.get(row.model);
        const d = (row.deployment && deployments.get(row.deployment)) || (m ? catalog.deployments(m)[0] : undefined);
        if (!d || d.provider !== providerId) continue;
        const u = unitsOf(row.units ?? {});
        if (!u) continue;
        const acc = out.get(d.upstreamModel) ?? { units: zero(), charged: zero() };
        // Each field at the price the record was billed at (its version's snapshot), in VND before rounding.
        const price = unitPrices((row.pricing ?? {}) as Pricing);
        for (const f of FIELDS) {
          acc.units[f] += u.units[f] ?? 0;
          acc.charged[f] += (u.exact[f] ?? 0) * price[f];
        }
        out.set(d.upstreamModel, acc);
      }
      progress();
      if (page.rowCount! < PAGE) break;
    }
    await c.query('COMMIT');
  } catch (e) {
    await c.query('ROLLBACK').catch(() => {});
    throw e;
  } finally {
    c.release();
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
  /** Called between steps and after each page of records (the activity heartbeats on it). */
  progress: () => void = () => {},
): Promise<DriftRow[]> {
  const p = deps.catalog.providers.get(providerId);
  if (!p) throw new Error(`unknown provider ${providerId}`);
  const reported = await providerReport(p, day, deps.env);
  progress();
  const costs = await providerCosts(p, day, deps.env);
  progress();
  const recorded = await recordedUsage(deps.db, deps.catalog, providerId, day, progress);
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
