import { pricingProblem, type Catalog, type Mode, type ModelConfig, type PriceSet } from '../catalog';
import type { Db, DbClient, Queryable } from '../db';
import { tx } from '../db';

/**
 * The price book (docs/billing.md, "Price versions"): every model's prices are a version in `price_versions`, in
 * force from its effective time until the next version of that model. The catalog file's prices are a version of
 * their own (`catalog`, found or recorded at start-up); an operator's change (`price-set`) or a scheduled import
 * (`catalog-import --effective-at`) is a later version that takes over when its time comes, in every process.
 *
 * The prices in force are put on the catalog's model objects (pricing / batchPricing, marked with their version),
 * so every request path keeps pricing as before and every record it writes (its prices snapshot) names its
 * version. A change replaces the objects; it never touches what was billed, which keeps its own snapshot.
 *
 * Changes compose in effective order: a `price-set` version stores what it set (`sets`) and, as `pricing`, those
 * fields over the prices in force just before it. A change scheduled before versions already scheduled rebuilds
 * their prices (they are not in force: nothing was billed at them), under a lock every reader of the book takes
 * too, so no process sees a version in force with the prices it had before the rebuild.
 */

export type PriceSource = 'catalog' | 'catalog-import' | 'price-set';

/** Per field, the price a change sets, or null: removed. */
export type PriceChanges = Record<string, unknown>;

/** What a price-set version set, of the prices and of the batch prices ({} where it set none). */
export interface PriceSets {
  pricing: PriceChanges;
  batchPricing: PriceChanges;
}

/** A model's whole prices (batch null: batch work at `pricing`). */
export interface Prices {
  pricing: PriceSet;
  batchPricing: PriceSet | null;
}

export interface PriceVersion extends Prices {
  id: number;
  model: string;
  effectiveAt: Date;
  source: PriceSource;
  note: string | null;
  /** A price-set's changes; null: the version sets every price (catalog, import, a price-set before migration 180). */
  sets: PriceSets | null;
}

const toVersion = (r: Record<string, any>): PriceVersion => ({
  id: Number(r.id),
  model: r.model,
  pricing: r.pricing,
  batchPricing: r.batch_pricing ?? null,
  effectiveAt: r.effective_at,
  source: r.source,
  note: r.note ?? null,
  sets: r.set_pricing ? { pricing: r.set_pricing, batchPricing: r.set_batch_pricing ?? {} } : null,
});

function applyChanges(base: PriceSet, changes: PriceChanges): PriceSet {
  const out: Record<string, unknown> = { ...barePrices(base) };
  for (const [k, v] of Object.entries(changes)) {
    if (v === null) delete out[k];
    else out[k] = v;
  }
  return out as PriceSet;
}

/** The prices in force from a version: its changes over `before`, or its own whole prices. */
export function pricesFrom(before: Prices, v: Pick<PriceVersion, 'sets' | 'pricing' | 'batchPricing'>): Prices {
  if (!v.sets) return { pricing: v.pricing, batchPricing: v.batchPricing };
  let batch = before.batchPricing;
  if (Object.keys(v.sets.batchPricing).length) {
    batch = applyChanges(before.batchPricing ?? {}, v.sets.batchPricing);
    // Every batch price removed: batch work at the list prices, never at none.
    if (!Object.keys(batch).length) batch = null;
  }
  return { pricing: applyChanges(before.pricing, v.sets.pricing), batchPricing: batch };
}

/** Why `p` cannot price a model of `mode` (its list or its batch prices), or null. */
function pricesProblem(mode: Mode, p: Prices): string | null {
  const list = pricingProblem(mode, p.pricing);
  if (list) return `--pricing: ${list}`;
  const batch = p.batchPricing ? pricingProblem(mode, p.batchPricing) : null;
  return batch ? `--batch-pricing: ${batch}` : null;
}

/** Every writer and reader of the book takes this lock (writers exclusive, the price book's refresh shared). */
const LOCK = "hashtext('price_versions')";

/** A price change the book refuses (a time passed, an ambiguous schedule, prices a model cannot be billed by). */
export class PriceScheduleError extends Error {}

/** The prices as stored in a version: without the run-time marks. */
export function barePrices(p: PriceSet): PriceSet {
  const { priceVersion: _v, priceKind: _k, ...rest } = p;
  return rest;
}

const json = (p: PriceSet | null | undefined) => (p ? JSON.stringify(barePrices(p)) : null);

/** Takes the book's lock; the database's clock (to the millisecond, as a JavaScript date holds it). */
async function lockBook(c: DbClient): Promise<Date> {
  await c.query(`SELECT pg_advisory_xact_lock(${LOCK})`);
  return (await c.query("SELECT date_trunc('milliseconds', clock_timestamp()) AS now")).rows[0].now;
}

interface NewVersion {
  model: string;
  source: PriceSource;
  note?: string | null;
  /** A price-set's changes; absent: `pricing` / `batchPricing` are the whole prices. */
  sets?: PriceSets;
  pricing?: PriceSet;
  batchPricing?: PriceSet | null;
}

const at = (d: Date) => d.toISOString();

/** Why `v` at the instant of `x` would be ambiguous (both set one price then), or null. */
function sameInstantProblem(v: NewVersion, x: PriceVersion): string | null {
  const when = `v${x.id} (${x.source}) at ${at(x.effectiveAt)}`;
  if (!v.sets || !x.sets) return `${when} sets every price at that same instant: which one wins is ambiguous`;
  for (const [side, flag] of [
    ['pricing', '--pricing'],
    ['batchPricing', '--batch-pricing'],
  ] as const) {
    const both = Object.keys(v.sets[side]).filter((k) => k in x.sets![side]);
    if (both.length)
      return `${flag}.${both[0]}: ${when} already changes it at that same instant: which one wins is ambiguous`;
  }
  return null;
}

/**
 * Records a version in force from `from` (the book locked): its whole prices over those in force just before it,
 * then each price-set version scheduled after it rebuilt over it. `base`: the prices before any version (the
 * catalog file's). `strict` (an operator's change): a same-instant clash, or a version left unable to price its
 * model, refuses the change; otherwise (a process recording its catalog) such a version keeps its prices.
 */
async function insertVersion(
  c: DbClient,
  mode: Mode,
  base: Prices,
  from: Date,
  v: NewVersion,
  opts: { strict: boolean; vet?: (before: Prices) => string | null },
): Promise<PriceVersion> {
  const all = await listPriceVersions(c, v.model);
  const earlier = all.filter((x) => x.effectiveAt.getTime() <= from.getTime());
  const later = all.filter((x) => x.effectiveAt.getTime() > from.getTime());
  if (opts.strict)
    for (const x of earlier.filter((x) => x.effectiveAt.getTime() === from.getTime())) {
      const problem = sameInstantProblem(v, x);
      if (problem) throw new PriceScheduleError(problem);
    }
  const before = earlier.reduce(pricesFrom, base);
  const own = pricesFrom(before, { sets: v.sets ?? null, pricing: v.pricing!, batchPricing: v.batchPricing ?? null });
  const problem = opts.strict ? (opts.vet?.(before) ?? pricesProblem(mode, own)) : null;
  if (problem) throw new PriceScheduleError(problem);
  const r = await c.query(
    `INSERT INTO price_versions (model, pricing, batch_pricing, effective_at, source, note, set_pricing,
       set_batch_pricing)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING *`,
    [
      v.model,
      json(own.pricing),
      json(own.batchPricing),
      from,
      v.source,
      v.note ?? null,
      v.sets ? JSON.stringify(v.sets.pricing) : null,
      v.sets ? JSON.stringify(v.sets.batchPricing) : null,
    ],
  );
  let state = own;
  for (const x of later) {
    state = pricesFrom(state, x);
    if (!x.sets) continue;
    const left = pricesProblem(mode, state);
    if (left && opts.strict)
      throw new PriceScheduleError(`v${x.id}, scheduled from ${at(x.effectiveAt)}, would be left with ${left}`);
    if (left) {
      state = { pricing: x.pricing, batchPricing: x.batchPricing };
      continue;
    }
    await c.query(
      `UPDATE price_versions SET pricing = $2, batch_pricing = $3
       WHERE id = $1 AND (pricing IS DISTINCT FROM $2::jsonb OR batch_pricing IS DISTINCT FROM $3::jsonb)`,
      [x.id, json(state.pricing), json(state.batchPricing)],
    );
  }
  return toVersion(r.rows[0]);
}

/**
 * Schedules an operator's change of a model's prices (`price-set`): `sets` from `effectiveAt` (null: now), which
 * must not have passed. `vet` may refuse it given the prices in force just before it.
 */
export async function schedulePriceChange(
  db: Db,
  model: Pick<ModelConfig, 'id' | 'mode' | 'pricing' | 'batchPricing'>,
  change: { sets: PriceSets; effectiveAt: Date | null; note: string | null },
  vet?: (before: Prices) => string | null,
): Promise<PriceVersion> {
  return tx(db, async (c) => {
    const now = await lockBook(c);
    if (change.effectiveAt && change.effectiveAt.getTime() <= now.getTime())
      throw new PriceScheduleError(
        `--effective-at ${at(change.effectiveAt)} has passed (the database's clock reads ${at(now)})`,
      );
    const base = { pricing: model.pricing, batchPricing: model.batchPricing ?? null };
    return insertVersion(
      c,
      model.mode,
      base,
      change.effectiveAt ?? now,
      { model: model.id, source: 'price-set', note: change.note, sets: change.sets },
      { strict: true, vet },
    );
  });
}

/** The model's versions, oldest first. */
export async function listPriceVersions(db: Queryable, model: string): Promise<PriceVersion[]> {
  const r = await db.query('SELECT * FROM price_versions WHERE model = $1 ORDER BY effective_at, id', [model]);
  return r.rows.map(toVersion);
}

/** The version in force for `model` at `at` (default now) among every source, or null. */
export async function priceVersionAt(
  db: Queryable,
  model: string,
  at: Date | null = null,
): Promise<PriceVersion | null> {
  const r = await db.query(
    `SELECT * FROM price_versions WHERE model = $1 AND effective_at <= COALESCE($2, now())
     ORDER BY effective_at DESC, id DESC LIMIT 1`,
    [model, at],
  );
  return r.rowCount ? toVersion(r.rows[0]) : null;
}

/**
 * The newest change of `model` (an operator's or an import: never another process's catalog file) in force at `at`
 * that is newer than version `than`, or null: what a process's book still on `than` has not read yet.
 */
export async function changeInForceAfter(
  db: Queryable,
  model: string,
  than: number,
  at: Date,
): Promise<PriceVersion | null> {
  const r = await db.query(
    `SELECT v.* FROM price_versions v, price_versions t
     WHERE t.id = $2 AND v.model = $1 AND v.source <> 'catalog' AND v.effective_at <= $3
       AND (v.effective_at, v.id) > (t.effective_at, t.id)
     ORDER BY v.effective_at DESC, v.id DESC LIMIT 1`,
    [model, than, at],
  );
  return r.rowCount ? toVersion(r.rows[0]) : null;
}

/**
 * The catalog file's prices of each model as a version: the latest file version with the same prices, or a new
 * one in force now (the file changed). Serialised across processes starting together.
 */
export async function recordCatalogVersions(
  db: Db,
  models: ModelConfig[],
  source: 'catalog' | 'catalog-import' = 'catalog',
  effectiveAt: Date | null = null,
): Promise<Map<string, number>> {
  return tx(db, async (c) => {
    const now = await lockBook(c);
    // An import's time must be ahead: what was billed before it keeps its prices.
    if (effectiveAt && effectiveAt.getTime() <= now.getTime())
      throw new PriceScheduleError(
        `--effective-at ${at(effectiveAt)} has passed (the database's clock reads ${at(now)})`,
      );
    const ids = new Map<string, number>();
    for (const m of models) {
      const r = await c.query(
        `SELECT id, (pricing = $2::jsonb AND batch_pricing IS NOT DISTINCT FROM $3::jsonb) AS same
         FROM price_versions WHERE model = $1 AND source IN ('catalog', 'catalog-import')
         ORDER BY (pricing = $2::jsonb AND batch_pricing IS NOT DISTINCT FROM $3::jsonb) DESC, id DESC LIMIT 1`,
        [m.id, json(m.pricing), json(m.batchPricing)],
      );
      if (r.rowCount && r.rows[0].same) ids.set(m.id, Number(r.rows[0].id));
      else {
        const whole = { pricing: m.pricing, batchPricing: m.batchPricing ?? null };
        const v = await insertVersion(
          c,
          m.mode,
          whole,
          effectiveAt ?? now,
          { model: m.id, source, ...whole },
          { strict: source === 'catalog-import' },
        );
        ids.set(m.id, v.id);
      }
    }
    return ids;
  });
}

export interface PriceBookOptions {
  /** How often every process looks for versions that took effect (besides a timer at the next scheduled one). */
  refreshMs: number;
  onError?: (e: unknown) => void;
}

/** A model's prices in force and its scheduled changes, as this process knows them. */
export interface ModelPrices {
  current: PriceVersion | null;
  scheduled: PriceVersion[];
}

export class PriceBook {
  /** The catalog file's own version of each model. */
  private own = new Map<string, number>();
  private file = new Map<string, { pricing: PriceSet; batchPricing?: PriceSet }>();
  private readonly state = new Map<string, ModelPrices>();
  private interval: NodeJS.Timeout | null = null;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly db: Db,
    private readonly catalog: Catalog,
    private readonly opts: PriceBookOptions,
  ) {}

  /** Records the catalog's versions, puts the prices in force on the models, and keeps them current. */
  async start(): Promise<void> {
    for (const m of this.catalog.models) this.file.set(m.id, { pricing: m.pricing, batchPricing: m.batchPricing });
    this.own = await recordCatalogVersions(this.db, this.catalog.models);
    await this.refresh();
    this.interval = setInterval(() => void this.refresh().catch((e) => this.opts.onError?.(e)), this.opts.refreshMs);
    this.interval.unref();
  }

  stop(): void {
    if (this.interval) clearInterval(this.interval);
    if (this.timer) clearTimeout(this.timer);
    this.interval = this.timer = null;
  }

  /** The model's prices in force and scheduled changes (what /public/models shows). */
  pricesOf(modelId: string): ModelPrices | undefined {
    return this.state.get(modelId);
  }

  /** Reads the versions in force and scheduled, and puts the ones in force on the catalog's models. */
  async refresh(): Promise<void> {
    // Under the book's lock (shared): a change being scheduled cannot rebuild a version this reads as in force.
    await tx(this.db, async (c) => {
      await c.query(`SELECT pg_advisory_xact_lock_shared(${LOCK})`);
      await this.load(c);
    });
  }

  private async load(c: DbClient): Promise<void> {
    const ids = this.catalog.models.map((m) => m.id);
    const r = await c.query(
      `SELECT *, effective_at <= now() AS in_force, now() AS db_now FROM price_versions
       WHERE model = ANY($1) AND (source <> 'catalog' OR id = ANY($2))
       ORDER BY model, effective_at, id`,
      [ids, [...this.own.values()]],
    );
    const byModel = new Map<string, ModelPrices>();
    let next: number | null = null;
    let dbNow = Date.now();
    for (const row of r.rows) {
      dbNow = (row.db_now as Date).getTime();
      const v = toVersion(row);
      const s = byModel.get(v.model) ?? { current: null, scheduled: [] };
      if (row.in_force) s.current = v;
      else {
        s.scheduled.push(v);
        next = next === null ? v.effectiveAt.getTime() : Math.min(next, v.effectiveAt.getTime());
      }
      byModel.set(v.model, s);
    }
    // A model whose own version is not in force yet (an import scheduled ahead): the version in force, any source.
    const waiting = ids.filter((id) => !byModel.get(id)?.current);
    if (waiting.length) {
      const w = await c.query(
        `SELECT DISTINCT ON (model) * FROM price_versions WHERE model = ANY($1) AND effective_at <= now()
         ORDER BY model, effective_at DESC, id DESC`,
        [waiting],
      );
      for (const row of w.rows) {
        const s = byModel.get(row.model) ?? { current: null, scheduled: [] };
        s.current = toVersion(row);
        byModel.set(row.model, s);
      }
    }
    for (const m of this.catalog.models) {
      const s = byModel.get(m.id) ?? { current: null, scheduled: [] };
      this.state.set(m.id, s);
      this.apply(m, s.current);
    }
    // A scheduled change takes effect on time here, not at the next interval.
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (next !== null && next - dbNow < this.opts.refreshMs) {
      this.timer = setTimeout(
        () => void this.refresh().catch((e) => this.opts.onError?.(e)),
        Math.max(0, next - dbNow) + 5,
      );
      this.timer.unref();
    }
  }

  /** Puts version `v` (none: the file's prices, unversioned) on the model; the same version keeps its objects. */
  private apply(m: ModelConfig, v: PriceVersion | null): void {
    if (v && m.pricing.priceVersion === v.id) return;
    if (!v) {
      const f = this.file.get(m.id)!;
      m.pricing = f.pricing;
      m.batchPricing = f.batchPricing;
      return;
    }
    m.pricing = { ...v.pricing, priceVersion: v.id };
    m.batchPricing = v.batchPricing ? { ...v.batchPricing, priceVersion: v.id, priceKind: 'batch' } : undefined;
  }
}
