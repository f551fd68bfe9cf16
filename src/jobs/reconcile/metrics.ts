import client from 'prom-client';
import type { Db } from '../../db';

/**
 * `gateway_reconcile_drift_ratio{provider,model,field}`: (reported - recorded) / recorded units of each provider's
 * latest reconciled day (positive: the provider bills more than the gateway recorded). Read from
 * reconciliation_drift at scrape time, so every API process shows the same, whichever worker ran the
 * reconciliation. Labels are bounded by the catalog's providers and models and the reconciled fields.
 */
export function registerReconcileMetrics(registry: client.Registry, db: Db): void {
  new client.Gauge({
    name: 'gateway_reconcile_drift_ratio',
    help: 'Provider-reported minus gateway-recorded upstream units over recorded, latest reconciled day per provider',
    labelNames: ['provider', 'model', 'field'] as const,
    registers: [registry],
    async collect() {
      const r = await db.query(
        `SELECT provider, model, field, reported, recorded FROM reconciliation_drift d
         WHERE day = (SELECT max(day) FROM reconciliation_drift x WHERE x.provider = d.provider)`,
      );
      this.reset();
      for (const row of r.rows) {
        const recorded = Number(row.recorded);
        const drift = Number(row.reported) - recorded;
        this.set(
          { provider: row.provider, model: row.model, field: row.field },
          recorded > 0 ? drift / recorded : drift === 0 ? 0 : 1,
        );
      }
    },
  });
}
