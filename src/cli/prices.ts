import path from 'node:path';
import { parseArgs } from 'node:util';
import { Catalog, pricingProblem, type PriceSet } from '../catalog/catalog';
import type { Db } from '../db/pool';
import { projectRoot } from '../projectRoot';
import { operatorActor, recordAudit } from '../organizations';
import { addPriceVersion, listPriceVersions, priceVersionAt, recordCatalogVersions } from '../billing/priceBook';

/**
 * Price versions from the operator CLI (docs/billing.md, "Price versions"):
 *   price-set <model> --pricing '<json>' [--batch-pricing '<json>'] [--effective-at <ISO date>|now] [--note text]
 *   price-list <model>
 * A change is a new version: the given prices over those in force at its effective time, checked as the catalog
 * checks a model of its mode. Every API process and worker takes it up when it takes effect.
 */

export const PRICES_USAGE = [
  "price-set <model> --pricing '<json>' [--batch-pricing '<json>'] [--effective-at date|now] [--note text]",
  '                                            schedule a price change (a new price version; the JSON fields',
  '                                            replace those of the prices in force then; default: now)',
  'price-list <model>                          the model price versions: in force, past and scheduled',
].join('\n');

export class PricesUsageError extends Error {}

export const isPriceCommand = (cmd: string) => cmd === 'price-set' || cmd === 'price-list';

/** An ISO 8601 date-time, or `now` (null: the database's now). */
export function parseEffectiveAt(v: string | undefined): Date | null {
  if (v === undefined || v === 'now') return null;
  const d = new Date(v);
  if (Number.isNaN(d.getTime())) throw new PricesUsageError('--effective-at must be an ISO 8601 date-time or "now"');
  return d;
}

function jsonObject(v: string | undefined, flag: string): Record<string, unknown> | undefined {
  if (v === undefined) return undefined;
  let o: unknown;
  try {
    o = JSON.parse(v);
  } catch {
    throw new PricesUsageError(`${flag} must be a JSON object`);
  }
  if (typeof o !== 'object' || o === null || Array.isArray(o))
    throw new PricesUsageError(`${flag} must be a JSON object`);
  return o as Record<string, unknown>;
}

/** Parses a price command (a PricesUsageError before any database work); the work to run against the database. */
export function planPriceCommand(
  cmd: string,
  args: string[],
  env: NodeJS.ProcessEnv,
): (db: Db, out: (line: string) => void) => Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args,
      allowPositionals: true,
      strict: true,
      options: {
        pricing: { type: 'string' },
        'batch-pricing': { type: 'string' },
        'effective-at': { type: 'string' },
        note: { type: 'string' },
        catalog: { type: 'string' },
        json: { type: 'boolean' },
      },
    });
  } catch (e) {
    throw new PricesUsageError((e as Error).message);
  }
  const { values, positionals } = parsed;
  if (positionals.length !== 1) throw new PricesUsageError(`${cmd} takes one <model>`);
  const catalogPath = values.catalog ?? env.CATALOG_PATH ?? path.join(projectRoot(), 'config', 'catalog.json');
  const model = Catalog.load(catalogPath, env).get(positionals[0]);
  if (!model) throw new PricesUsageError(`no model ${JSON.stringify(positionals[0])} in ${catalogPath}`);
  const asJson = values.json === true;

  if (cmd === 'price-list') {
    return async (db, out) => {
      const versions = await listPriceVersions(db, model.id);
      const now = await priceVersionAt(db, model.id);
      if (asJson) out(JSON.stringify({ model: model.id, in_force: now?.id ?? null, versions }, null, 2));
      else
        for (const v of versions)
          out(
            `${v.id === now?.id ? '*' : ' '} v${v.id} ${v.effectiveAt.toISOString()} ${v.source}: ` +
              `${JSON.stringify(v.pricing)}${v.batchPricing ? ` batch ${JSON.stringify(v.batchPricing)}` : ''}` +
              (v.note ? ` (${v.note})` : ''),
          );
      return 0;
    };
  }

  const pricing = jsonObject(values.pricing, '--pricing');
  const batch = jsonObject(values['batch-pricing'], '--batch-pricing');
  if (!pricing && !batch) throw new PricesUsageError('price-set needs --pricing and/or --batch-pricing');
  const effectiveAt = parseEffectiveAt(values['effective-at']);
  return async (db, out) => {
    // The change applies over the prices in force at its time (the catalog file's before any version).
    const base = (await priceVersionAt(db, model.id, effectiveAt)) ?? {
      pricing: model.pricing,
      batchPricing: model.batchPricing ?? null,
    };
    const next: PriceSet = { ...base.pricing, ...(pricing ?? {}) };
    const nextBatch = batch ? { ...(base.batchPricing ?? {}), ...batch } : base.batchPricing;
    for (const [p, flag] of [
      [next, '--pricing'],
      ...(nextBatch ? [[nextBatch, '--batch-pricing'] as const] : []),
    ] as const) {
      const problem = pricingProblem(model.mode, p);
      if (problem) throw new PricesUsageError(`${flag}: ${problem}`);
    }
    const v = await addPriceVersion(db, {
      model: model.id,
      pricing: next,
      batchPricing: nextBatch,
      effectiveAt,
      source: 'price-set',
      note: values.note ?? null,
    });
    await recordAudit(db, {
      accountId: null,
      type: 'price.updated',
      actor: operatorActor(),
      resourceId: model.id,
      details: {
        model: model.id,
        version: v.id,
        pricing: next,
        batch_pricing: nextBatch,
        effective_at: v.effectiveAt.toISOString(),
        note: values.note ?? null,
      },
    });
    if (asJson) out(JSON.stringify(v, null, 2));
    else out(`price version v${v.id} of ${model.id} in force from ${v.effectiveAt.toISOString()}`);
    return 0;
  };
}

/** After `catalog-import --effective-at`: the imported models' prices as versions (source `catalog-import`). */
export async function recordImportedVersions(
  db: Db,
  catalogPath: string,
  modelIds: string[],
  effectiveAt: Date | null,
  env: NodeJS.ProcessEnv,
): Promise<Map<string, number>> {
  const catalog = Catalog.load(catalogPath, env);
  const models = modelIds.map((id) => catalog.get(id)).filter((m) => m !== undefined);
  const versions = await recordCatalogVersions(db, models, 'catalog-import', effectiveAt);
  await recordAudit(db, {
    accountId: null,
    type: 'catalog.imported',
    actor: operatorActor(),
    resourceId: catalogPath,
    details: {
      catalog: catalogPath,
      versions: Object.fromEntries(versions),
      effective_at: effectiveAt?.toISOString() ?? null,
    },
  });
  return versions;
}
