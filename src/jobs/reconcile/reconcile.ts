import type { Catalog, Pricing, ProviderConfig, ProviderKind } from '../../catalog';
import {
  KINDS,
  PROVIDER_KINDS,
  type KindRow,
  REPORT_FIELDS,
  type ReportField,
  type ReportSource,
  type UsageReports,
} from '../../providers';
import type { Db } from '../../db';
import { tx } from '../../db';
import { breakdownOfUnits } from '../../billing';

/**
 * Reconciliation of one provider's day (docs/billing.md, "Reconciliation"): the provider's own usage report
 * (OpenAI's organization usage API, Anthropic's usage report, BytePlus's bill details, Google's Cloud Billing
 * export) against the gateway's usage records of calls it sent to that provider and its completed video jobs, per
 * upstream model and field (tokens by kind; images; speech characters; transcription seconds; video seconds); the
 * drift is stored (reconciliation_drift), with the margin: what customers were actually charged (the ledger's
 * integer VND) minus what the provider billed (reconciliation_charges). Providers of other kinds have no such
 * report the gateway reads yet: they are listed as not reconciled.
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

const sourceOf = (p: ProviderConfig, env: NodeJS.ProcessEnv): ReportSource => ({
  baseUrl: p.baseUrl,
  key: reportKey(p, env),
  config: p,
  env,
});

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
  await reader.usage(sourceOf(p, env), { start, end: start + DAY_MS }, add);
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
  await readerOf(p)?.costs(sourceOf(p, env), { start, end: start + DAY_MS }, add);
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
  // Video delivered (a gateway cost of a task that could not be cancelled): the provider bills the seconds made.
  if (typeof u.video_seconds === 'number')
    return { units: { video_seconds: u.video_seconds }, exact: { video_seconds: u.video_seconds } };
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
    video_seconds: 0,
  };
}

/** The gateway's record of one upstream model's day on a provider. */
export interface Recorded {
  units: Units;
  /**
   * What customers were actually charged (integer VND per call, as the ledger charged it), apportioned to the
   * fields by each field's share of the call's value at its list prices (fractional; they add up to `chargedVnd`).
   */
  charged: Units;
  /** The calls' actual charges: usage records' cost_vnd (each its share of a ledger charge), video jobs' cost_vnd. */
  chargedVnd: number;
  /** What their bills could not collect (the account or budget ran out): not charged, so not in the margin. */
  shortfallVnd: number;
  calls: number;
}

const emptyRecorded = (): Recorded => ({ units: zero(), charged: zero(), chargedVnd: 0, shortfallVnd: 0, calls: 0 });

/**
 * Splits a call's actual charge over its fields by their value at its prices (a call charged 1 VND whose tokens are
 * worth 0.03 VND of input and 0.16 of output books 0.16 to input and 0.84 to output): the fields' margins then add
 * up to the call's, whatever the rounding, discount or shortfall between its list value and its charge.
 */
function apportion(charge: number, exact: Partial<Units>, price: Units): Partial<Units> {
  const value = FIELDS.map((f) => (exact[f] ?? 0) * price[f]);
  const total = value.reduce((a, b) => a + b, 0);
  if (total > 0) return Object.fromEntries(FIELDS.map((f, i) => [f, (charge * value[i]) / total]));
  // Priced at zero yet charged (a minimum charge): to the first field the call used.
  const first = FIELDS.find((f) => (exact[f] ?? 0) > 0);
  return first ? { [first]: charge } : {};
}

/**
 * The gateway's record of the day's upstream usage on provider `p`, by upstream model: units, and what the calls
 * were actually charged. Every call the upstream served counts, whatever the answer's status: a stream the client
 * left (499) or the upstream cut (502) is billed (it has prices) and on the provider's bill too; a call billed
 * nothing has none. Completed video jobs count by the UTC day they completed, their delivered seconds.
 */
export async function recordedUsage(
  db: Db,
  catalog: Catalog,
  providerId: string,
  day: string,
  progress: () => void = () => {},
): Promise<Map<string, Recorded>> {
  const deployments = new Map(catalog.allDeployments().map((d) => [d.id, d] as const));
  const out = new Map<string, Recorded>();
  /** The upstream model of a call on this provider (its deployment, else the model's first), or null. */
  const upstreamOf = (modelId: string, deploymentId: string | null) => {
    const m = catalog.get(modelId);
    const d = (deploymentId && deployments.get(deploymentId)) || (m ? catalog.deployments(m)[0] : undefined);
    return d && d.provider === providerId ? d.upstreamModel : null;
  };
  const add = (
    model: string,
    units: Partial<Units>,
    charged: Partial<Units>,
    chargedVnd: number,
    shortfall: number,
  ) => {
    const acc = out.get(model) ?? emptyRecorded();
    for (const f of FIELDS) {
      acc.units[f] += units[f] ?? 0;
      acc.charged[f] += charged[f] ?? 0;
    }
    acc.chargedVnd += chargedVnd;
    acc.shortfallVnd += shortfall;
    acc.calls += 1;
    out.set(model, acc);
  };
  // The UTC day as instants: `$1::date` compared with a timestamptz would be the session time zone's day.
  const start = Date.parse(`${day}T00:00:00Z`);
  const range = [new Date(start).toISOString(), new Date(start + DAY_MS).toISOString()];
  const c = await db.connect();
  try {
    await c.query('BEGIN READ ONLY');
    await c.query(
      `DECLARE reconcile_day NO SCROLL CURSOR FOR
       SELECT model, deployment, units, pricing, cost_vnd, shortfall_vnd FROM usage_records
       WHERE created_at >= $1::timestamptz AND created_at < $2::timestamptz
         AND (status < 400 OR pricing IS NOT NULL)
         AND NOT (units ? 'cache_hit') -- a response cache hit called no provider: nothing on its bill`,
      range,
    );
    for (;;) {
      const page = await c.query(`FETCH ${PAGE} FROM reconcile_day`);
      for (const row of page.rows) {
        const model = upstreamOf(row.model, row.deployment);
        if (!model) continue;
        const u = unitsOf(row.units ?? {});
        if (!u) continue;
        const cost = Number(row.cost_vnd);
        add(
          model,
          u.units,
          apportion(cost, u.exact, unitPrices((row.pricing ?? {}) as Pricing)),
          cost,
          Number(row.shortfall_vnd),
        );
      }
      progress();
      if (page.rowCount! < PAGE) break;
    }
    await c.query('CLOSE reconcile_day');
    // Video: the seconds each completed job was billed on (what the provider delivered), charged its cost_vnd; the
    // provider is the accepting deployment's (a submission may have fallen back to another provider's).
    await c.query(
      `DECLARE reconcile_videos NO SCROLL CURSOR FOR
       SELECT model, deployment, coalesce((billed->>'seconds')::int, result_duration_seconds, 0) AS seconds,
              coalesce(cost_vnd, 0) AS cost_vnd, shortfall_vnd
       FROM video_jobs
       WHERE status = 'completed' AND completed_at >= $1::timestamptz AND completed_at < $2::timestamptz`,
      range,
    );
    for (;;) {
      const page = await c.query(`FETCH ${PAGE} FROM reconcile_videos`);
      for (const row of page.rows) {
        const model = upstreamOf(row.model, row.deployment);
        if (!model) continue;
        const cost = Number(row.cost_vnd);
        add(model, { video_seconds: row.seconds }, { video_seconds: cost }, cost, Number(row.shortfall_vnd));
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

/**
 * The gateway's own costs of the day on provider `p` (src/billing/gatewayCosts.ts: calls no customer was charged for,
 * each once): units by upstream model, the drift they explain. A cost is attributed to its deployment, else to its
 * model's first (as a usage record without one).
 */
export async function gatewayCostUnits(
  db: Db,
  catalog: Catalog,
  providerId: string,
  day: string,
): Promise<Map<string, Units>> {
  const deployments = new Map(catalog.allDeployments().map((d) => [d.id, d] as const));
  const start = Date.parse(`${day}T00:00:00Z`);
  const r = await db.query(
    `SELECT model, deployment, units FROM gateway_costs
     WHERE created_at >= $1::timestamptz AND created_at < $2::timestamptz`,
    [new Date(start).toISOString(), new Date(start + DAY_MS).toISOString()],
  );
  const out = new Map<string, Units>();
  for (const row of r.rows) {
    const m = catalog.get(row.model);
    const d = (row.deployment && deployments.get(row.deployment)) || (m ? catalog.deployments(m)[0] : undefined);
    if (!d || d.provider !== providerId) continue;
    const u = unitsOf(row.units ?? {});
    if (!u) continue;
    const acc = out.get(d.upstreamModel) ?? zero();
    for (const f of FIELDS) acc[f] += u.units[f] ?? 0;
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
  /** The part of the drift the gateway's own recorded costs explain (their units); the rest is unexplained. */
  explained: number;
  /** What the provider billed for the field, in VND; what customers were actually charged for it (apportioned). */
  reportedCostVnd: number;
  chargedVnd: number;
}

/** A model's day: what customers were actually charged (integer VND) against what the provider billed. */
export interface ChargeRow {
  model: string;
  calls: number;
  chargedVnd: number;
  shortfallVnd: number;
  reportedCostVnd: number;
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
  return (await reconcileDay(deps, providerId, day, progress)).rows;
}

/** Reconciles provider `providerId` for UTC `day`: the drift by field and the margin by model, stored. */
export async function reconcileDay(
  deps: { db: Db; catalog: Catalog; env?: NodeJS.ProcessEnv },
  providerId: string,
  day: string,
  progress: () => void = () => {},
): Promise<{ rows: DriftRow[]; charges: ChargeRow[] }> {
  const p = deps.catalog.providers.get(providerId);
  if (!p) throw new Error(`unknown provider ${providerId}`);
  const reported = await providerReport(p, day, deps.env);
  progress();
  const costs = await providerCosts(p, day, deps.env);
  progress();
  const recorded = await recordedUsage(deps.db, deps.catalog, providerId, day, progress);
  const own = await gatewayCostUnits(deps.db, deps.catalog, providerId, day);
  const rate = usdVndOf(deps.env);
  const rows: DriftRow[] = [];
  const charges: ChargeRow[] = [];
  for (const model of new Set([...reported.keys(), ...recorded.keys(), ...costs.keys(), ...own.keys()])) {
    const rep = reported.get(model) ?? zero();
    const rec = recorded.get(model) ?? emptyRecorded();
    const cost = costs.get(model) ?? zero();
    const explained = own.get(model) ?? zero();
    let modelCost = 0;
    for (const field of FIELDS) {
      modelCost += cost[field] * rate;
      if (rep[field] === 0 && rec.units[field] === 0 && explained[field] === 0) continue;
      rows.push({
        model,
        field,
        reported: rep[field],
        recorded: rec.units[field],
        drift: rep[field] - rec.units[field],
        explained: explained[field],
        reportedCostVnd: round4(cost[field] * rate),
        chargedVnd: round4(rec.charged[field]),
      });
    }
    if (rec.calls > 0 || modelCost > 0)
      charges.push({
        model,
        calls: rec.calls,
        chargedVnd: rec.chargedVnd,
        shortfallVnd: rec.shortfallVnd,
        reportedCostVnd: round4(modelCost),
      });
  }
  await tx(deps.db, async (c) => {
    await c.query('DELETE FROM reconciliation_drift WHERE provider = $1 AND day = $2', [providerId, day]);
    await c.query('DELETE FROM reconciliation_charges WHERE provider = $1 AND day = $2', [providerId, day]);
    for (const r of rows)
      await c.query(
        `INSERT INTO reconciliation_drift
           (provider, day, model, field, reported, recorded, drift, reported_cost_vnd, charged_vnd, explained)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
        [
          providerId,
          day,
          r.model,
          r.field,
          r.reported,
          r.recorded,
          r.drift,
          r.reportedCostVnd,
          r.chargedVnd,
          r.explained,
        ],
      );
    for (const x of charges)
      await c.query(
        `INSERT INTO reconciliation_charges
           (provider, day, model, calls, charged_vnd, shortfall_vnd, reported_cost_vnd)
         VALUES ($1, $2, $3, $4, $5, $6, $7)`,
        [providerId, day, x.model, x.calls, x.chargedVnd, x.shortfallVnd, x.reportedCostVnd],
      );
    // The day is reconciled, whatever it found (no rows: a day without usage, reconciled empty).
    await c.query(
      `INSERT INTO reconciliation_runs (provider, day, rows) VALUES ($1, $2, $3)
       ON CONFLICT (provider, day) DO UPDATE SET rows = EXCLUDED.rows, reconciled_at = now()`,
      [providerId, day, rows.length],
    );
  });
  return { rows, charges };
}
