import path from 'node:path';
import { parseArgs } from 'node:util';
import { Catalog } from '../catalog';
import type { Db } from '../db';
import { projectRoot } from '../projectRoot';
import { lookbackDaysOf, reconcileStatus } from '../reconcile/status';
import { KINDS } from '../providers';

/**
 * `reconcile-status [--days n] [--provider id]` (docs/operations.md): each catalog provider's reconciliation of the
 * last n UTC days before today: reconciled, reconciled with no usage, or not reconciled (exit 1 when a day is not).
 */

export const RECONCILE_STATUS_USAGE = [
  'reconcile-status [--days n] [--provider id] the days each provider is reconciled, reconciled with no usage, or',
  '                                            not reconciled yet (default: RECONCILE_LOOKBACK_DAYS, 7; at most',
  '                                            92; exit 1 when a day is not reconciled)',
].join('\n');

export class ReconcileStatusUsageError extends Error {}

/** Parses the command (a ReconcileStatusUsageError before any database work); the work to run against the database. */
export function planReconcileStatus(
  args: string[],
  env: NodeJS.ProcessEnv,
): (db: Db, out: (line: string) => void) => Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args,
      allowPositionals: false,
      strict: true,
      options: {
        days: { type: 'string' },
        provider: { type: 'string' },
        catalog: { type: 'string' },
        json: { type: 'boolean' },
      },
    });
  } catch (e) {
    throw new ReconcileStatusUsageError((e as Error).message);
  }
  const { values } = parsed;
  const days = values.days === undefined ? Math.max(1, lookbackDaysOf(env)) : Number(values.days);
  if ((values.days !== undefined && !/^\d+$/.test(values.days)) || days < 1 || days > 92)
    throw new ReconcileStatusUsageError('--days must be a whole number of days from 1 to 92');
  const catalogPath = values.catalog ?? env.CATALOG_PATH ?? path.join(projectRoot(), 'config', 'catalog.json');
  const catalog = Catalog.load(catalogPath, KINDS, env);
  if (values.provider !== undefined && !catalog.providers.has(values.provider))
    throw new ReconcileStatusUsageError(`--provider: no provider ${JSON.stringify(values.provider)} in ${catalogPath}`);

  return async (db, out) => {
    const all = await reconcileStatus(db, catalog, { days });
    const status = values.provider === undefined ? all : all.filter((p) => p.id === values.provider);
    const missing = status.reduce((n, p) => n + p.missing.length, 0);
    if (values.json) out(JSON.stringify({ days, not_reconciled_days: missing, providers: status }, null, 2));
    else
      for (const p of status) {
        if (!p.reconciled) {
          out(`${p.id} (${p.kind}): not reconciled: no report read yet (its bill: ${p.report ?? 'none known'})`);
          continue;
        }
        out(
          `${p.id} (${p.kind}): ` +
            (p.missing.length
              ? `${p.missing.length} of ${days} days not reconciled: ${p.missing.join(', ')}`
              : `the last ${days} days reconciled`),
        );
        for (const d of p.days)
          out(
            `  ${d.day}  ` +
              (d.status === 'not_reconciled'
                ? 'NOT RECONCILED'
                : d.status === 'reconciled_empty'
                  ? `reconciled, no usage (${d.reconciled_at})`
                  : `reconciled, ${d.rows} rows (${d.reconciled_at})`),
          );
      }
    return missing > 0 ? 1 : 0;
  };
}
