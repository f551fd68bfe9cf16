import type Router from '@koa/router';
import type { AppDeps } from '../operations';
import { route, type GatewayState } from '../api/middleware';
import { requireCsrf, requireOperator, requireSession, sameOrigin } from './auth';
import { intParam } from './params';
import { FIELDS, isReconciled, NOT_RECONCILED, reportedFields } from '../reconcile/reconcile';
import { reconcileStatus } from '../reconcile/status';

/**
 * GET /console/api/admin/reconciliation?days=N (operators): per provider, day, upstream model and field, the units
 * and cost as the provider reports them and as the gateway recorded them, the drift (explained by the gateway's own
 * recorded costs, and unexplained) and the margin (what customers were actually charged minus what the provider
 * billed); per provider, day and model the margin in the ledger's integer VND (`margins`); every catalog provider,
 * reconciled or not (with the report it would be reconciled from), with the fields its report reconciles and those
 * it does not, and each of the N days before today: reconciled, reconciled with no usage, or not reconciled (`days`,
 * `not_reconciled_days`).
 */
export function mountReconciliationApi(r: Router<GatewayState>, deps: AppDeps): void {
  const auth = [sameOrigin(deps), requireSession(deps), requireOperator(), requireCsrf()];
  r.get('/console/api/admin/reconciliation', route('/console/api/admin/reconciliation'), ...auth, async (ctx) => {
    const days = intParam(ctx.query.days, 'days', 7, 1, 92);
    const rows = await deps.db.query(
      `SELECT provider, to_char(day, 'YYYY-MM-DD') AS day, model, field, reported, recorded, drift, explained,
              reported_cost_vnd::float8 AS reported_cost_vnd, charged_vnd::float8 AS charged_vnd, run_at
       FROM reconciliation_drift WHERE day > current_date - $1::int
       ORDER BY day DESC, provider, model, field`,
      [days],
    );
    const margins = await deps.db.query(
      `SELECT provider, to_char(day, 'YYYY-MM-DD') AS day, model, calls, charged_vnd, shortfall_vnd,
              reported_cost_vnd::float8 AS reported_cost_vnd
       FROM reconciliation_charges WHERE day > current_date - $1::int
       ORDER BY day DESC, provider, model`,
      [days],
    );
    const status = new Map((await reconcileStatus(deps.db, deps.catalog, { days })).map((s) => [s.id, s] as const));
    ctx.body = {
      providers: [...deps.catalog.providers.values()].map((p) => {
        const fields = reportedFields(p);
        return {
          id: p.id,
          kind: p.kind,
          reconciled: isReconciled(p),
          report: isReconciled(p) ? null : (NOT_RECONCILED[p.kind] ?? null),
          fields,
          not_reconciled_fields: FIELDS.filter((f) => !fields.includes(f)),
          days: status.get(p.id)?.days ?? [],
          not_reconciled_days: status.get(p.id)?.missing ?? [],
        };
      }),
      margins: margins.rows.map((x) => ({
        provider: x.provider,
        day: x.day,
        model: x.model,
        calls: Number(x.calls),
        charged_vnd: Number(x.charged_vnd),
        shortfall_vnd: Number(x.shortfall_vnd),
        reported_cost_vnd: x.reported_cost_vnd,
        margin_vnd: Math.round((Number(x.charged_vnd) - x.reported_cost_vnd) * 10_000) / 10_000,
      })),
      data: rows.rows.map((x) => ({
        provider: x.provider,
        day: x.day,
        model: x.model,
        field: x.field,
        reported_units: Number(x.reported),
        recorded_units: Number(x.recorded),
        drift_units: Number(x.drift),
        drift_ratio: Number(x.recorded) > 0 ? Number(x.drift) / Number(x.recorded) : null,
        // The drift the gateway's own recorded costs explain (calls no customer was charged for), and the rest.
        explained_units: Number(x.explained),
        unexplained_units: Number(x.drift) - Number(x.explained),
        reported_cost_vnd: x.reported_cost_vnd,
        charged_vnd: x.charged_vnd,
        margin_vnd: Math.round((x.charged_vnd - x.reported_cost_vnd) * 10_000) / 10_000,
        run_at: (x.run_at as Date).toISOString(),
      })),
    };
  });
}
