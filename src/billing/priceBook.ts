import type { Catalog, ModelConfig, PriceSet } from '../catalog/catalog';
import type { Db, Queryable } from '../db/pool';
import { tx } from '../db/pool';

/**
 * The price book (docs/billing.md, "Price versions"): every model's prices are a version in `price_versions`, in
 * force from its effective time until the next version of that model. The catalog file's prices are a version of
 * their own (`catalog`, found or recorded at start-up); an operator's change (`price-set`) or a scheduled import
 * (`catalog-import --effective-at`) is a later version that takes over when its time comes, in every process.
 *
 * The prices in force are put on the catalog's model objects (pricing / batchPricing, marked with their version),
 * so every request path keeps pricing as before and every record it writes (its prices snapshot) names its
 * version. A change replaces the objects; it never touches what was billed, which keeps its own snapshot.
 */

export type PriceSource = 'catalog' | 'catalog-import' | 'price-set';

export interface PriceVersion {
  id: number;
  model: string;
  pricing: PriceSet;
  batchPricing: PriceSet | null;
  effectiveAt: Date;
  source: PriceSource;
  note: string | null;
}

const toVersion = (r: Record<string, any>): PriceVersion => ({
  id: Number(r.id),
  model: r.model,
  pricing: r.pricing,
  batchPricing: r.batch_pricing ?? null,
  effectiveAt: r.effective_at,
  source: r.source,
  note: r.note ?? null,
});

/** The prices as stored in a version: without the run-time marks. */
export function barePrices(p: PriceSet): PriceSet {
  const { priceVersion: _v, priceKind: _k, ...rest } = p;
  return rest;
}

const json = (p: PriceSet | null | undefined) => (p ? JSON.stringify(barePrices(p)) : null);

/** Records a version; `effectiveAt` null: now (the database's clock, as every reader's). */
export async function addPriceVersion(
  db: Queryable,
  v: {
    model: string;
    pricing: PriceSet;
    batchPricing?: PriceSet | null;
    effectiveAt?: Date | null;
    source: PriceSource;
    note?: string | null;
  },
): Promise<PriceVersion> {
  const r = await db.query(
    `INSERT INTO price_versions (model, pricing, batch_pricing, effective_at, source, note)
     VALUES ($1, $2, $3, COALESCE($4, now()), $5, $6) RETURNING *`,
    [v.model, json(v.pricing), json(v.batchPricing), v.effectiveAt ?? null, v.source, v.note ?? null],
  );
  return toVersion(r.rows[0]);
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
    await c.query("SELECT pg_advisory_xact_lock(hashtext('price_versions'))");
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
        const v = await addPriceVersion(c, {
          model: m.id,
          pricing: m.pricing,
          batchPricing: m.batchPricing ?? null,
          effectiveAt,
          source,
        });
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
    const ids = this.catalog.models.map((m) => m.id);
    const r = await this.db.query(
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
      const w = await this.db.query(
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
