import type { Catalog } from '../src/catalog/catalog';
import type { Db } from '../src/db/pool';
import { reconcileProviderDay } from '../src/reconcile/reconcile';
import type { ReconcileActivities } from '../src/reconcile/workflowContract';

/** The reconciliation activity: reads the provider's report, compares, stores the drift (idempotent per day). */
export function createReconcileActivities(deps: { db: Db; catalog: Catalog }): ReconcileActivities {
  return {
    async reconcileProviderDay({ provider, day }) {
      const rows = await reconcileProviderDay(deps, provider, day);
      const maxDriftRatio = rows.reduce(
        (m, r) => Math.max(m, r.reported > 0 ? Math.abs(r.drift) / r.reported : r.recorded > 0 ? 1 : 0),
        0,
      );
      return { provider, day, rows: rows.length, maxDriftRatio };
    },
  };
}
