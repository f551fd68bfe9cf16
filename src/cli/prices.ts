import path from 'node:path';
import { parseArgs } from 'node:util';
import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import { Catalog, priceChangeProblem } from '../catalog';
import type { Db } from '../db';
import { projectRoot } from '../projectRoot';
import {
  listPriceVersions,
  PriceScheduleError,
  priceVersionAt,
  recordCatalogVersions,
  schedulePriceChange,
  type PriceChanges,
  type Prices,
} from '../billing';
import { operatorActor, recordAudit } from '../organizations';
import { KINDS } from '../providers';

/**
 * Price versions from the operator CLI (docs/billing.md, "Price versions"):
 *   price-set <model> --pricing '<json>' [--batch-pricing '<json>'] [--effective-at <ISO date>|now] [--note text]
 *   price-list <model>
 * A change is a new version: the given prices over those in force at its effective time, composed in effective
 * order whatever the order they were scheduled in, checked as the catalog checks a model of its mode. A list price
 * the model also has a batch price of is changed with its batch price (--batch-pricing), which the refusal states
 * at the discount in force. Every API process and worker takes it up when it takes effect.
 */

export const PRICES_USAGE = [
  "price-set <model> --pricing '<json>' [--batch-pricing '<json>'] [--effective-at date|now] [--note text]",
  '                                            schedule a price change (a new price version; the JSON fields',
  '                                            replace those of the prices in force then, null removes one;',
  '                                            a list price with a batch price needs its batch price too;',
  '                                            --effective-at: ahead, RFC 3339 with its offset; default: now)',
  'price-list <model>                          the model price versions: in force, past and scheduled',
].join('\n');

export class PricesUsageError extends Error {}

export const isPriceCommand = (cmd: string) => cmd === 'price-set' || cmd === 'price-list';

// RFC 3339 date-times (ajv-formats checks the calendar: no 2026-02-30, no hour 24) with their offset.
const isDateTime = addFormats(new Ajv()).compile({ type: 'string', format: 'date-time' });

/**
 * An RFC 3339 date-time with its offset, ahead of now, or `now` (null: the database's now). The database checks
 * "ahead" again on its own clock when the change is recorded.
 */
export function parseEffectiveAt(v: string | undefined): Date | null {
  if (v === undefined || v === 'now') return null;
  const d = new Date(v);
  if (!isDateTime(v) || Number.isNaN(d.getTime()))
    throw new PricesUsageError(
      `--effective-at ${JSON.stringify(v)} is not a date-time: give a real one with its offset ` +
        '(e.g. 2026-12-01T00:00:00+07:00) or "now"',
    );
  if (d.getTime() <= Date.now())
    throw new PricesUsageError(`--effective-at ${v} has passed: a change takes effect now or later, never before`);
  return d;
}

function jsonObject(v: string | undefined, flag: string): Record<string, unknown> | undefined {
  if (v === undefined) return undefined;
  let o: unknown;
  try {
    o = JSON.parse(v);
  } catch (e) {
    throw new PricesUsageError(`${flag} must be a JSON object (${(e as Error).message})`);
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
  const model = Catalog.load(catalogPath, KINDS, env).get(positionals[0]);
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
              (v.sets ? ` set ${JSON.stringify(v.sets)}` : '') +
              (v.note ? ` (${v.note})` : ''),
          );
      return 0;
    };
  }

  const pricing = jsonObject(values.pricing, '--pricing') ?? {};
  const batch = jsonObject(values['batch-pricing'], '--batch-pricing') ?? {};
  if (!Object.keys(pricing).length && !Object.keys(batch).length)
    throw new PricesUsageError('price-set needs --pricing and/or --batch-pricing');
  for (const [changes, flag] of [
    [pricing, '--pricing'],
    [batch, '--batch-pricing'],
  ] as const) {
    const problem = priceChangeProblem(model.mode, changes, flag);
    if (problem) throw new PricesUsageError(problem);
  }
  const effectiveAt = parseEffectiveAt(values['effective-at']);
  return async (db, out) => {
    let v;
    try {
      v = await schedulePriceChange(
        db,
        model,
        { sets: { pricing, batchPricing: batch }, effectiveAt, note: values.note ?? null },
        (before) => batchPricesMissing(model.id, before, pricing, batch),
      );
    } catch (e) {
      if (e instanceof PriceScheduleError) throw new PricesUsageError(e.message);
      throw e;
    }
    await recordAudit(db, {
      accountId: null,
      type: 'price.updated',
      actor: operatorActor(),
      resourceId: model.id,
      details: {
        model: model.id,
        version: v.id,
        set_pricing: pricing,
        set_batch_pricing: batch,
        pricing: v.pricing,
        batch_pricing: v.batchPricing,
        effective_at: v.effectiveAt.toISOString(),
        note: values.note ?? null,
      },
    });
    if (asJson) out(JSON.stringify(v, null, 2));
    else out(`price version v${v.id} of ${model.id} in force from ${v.effectiveAt.toISOString()}`);
    return 0;
  };
}

/**
 * Batch prices follow list prices (docs/billing.md): a list price the model also has a batch price of (at the
 * change's time) changes only with its batch price. The refusal states them at the discount in force then (the
 * batch price over the list price, rounded up to a whole VND), for the operator to give or amend.
 */
export function batchPricesMissing(
  model: string,
  before: Prices,
  pricing: PriceChanges,
  batch: PriceChanges,
): string | null {
  const list = before.pricing as Record<string, unknown>;
  const had = (before.batchPricing ?? {}) as Record<string, unknown>;
  const missing = Object.keys(pricing).filter((k) => k in had && !(k in batch));
  if (!missing.length) return null;
  const same = Object.fromEntries(
    missing.map((k) => {
      const [next, was, wasBatch] = [pricing[k], list[k], had[k]];
      if (typeof next !== 'number' || typeof was !== 'number' || typeof wasBatch !== 'number' || was === 0)
        return [k, next === null ? null : wasBatch];
      return [k, Number((BigInt(next) * BigInt(wasBatch) + BigInt(was) - 1n) / BigInt(was))];
    }),
  );
  return (
    `--batch-pricing.${missing[0]} is needed: ${model} has batch prices (${missing
      .map((k) => `${k} ${JSON.stringify(had[k])} for ${JSON.stringify(list[k])}`)
      .join(', ')}), which change with the list prices. At the same discount they would be ` +
    `--batch-pricing '${JSON.stringify(same)}': give them (or others) with --pricing`
  );
}

/** After `catalog-import --effective-at`: the imported models' prices as versions (source `catalog-import`). */
export async function recordImportedVersions(
  db: Db,
  catalogPath: string,
  modelIds: string[],
  effectiveAt: Date | null,
  env: NodeJS.ProcessEnv,
): Promise<Map<string, number>> {
  const catalog = Catalog.load(catalogPath, KINDS, env);
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
