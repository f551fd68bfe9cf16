import type { Client } from '@temporalio/client';
import type { Db } from '../../db';
import type { Logger } from '../../observability';
import { expireOrder, orderById } from './repo';
import { topupService, type TopupDeps } from './service';
import { readSepayStatement, runStatement } from './statement';
import type { TopupActivities, TopupStatementActivities } from './workflowContract';

/**
 * The top-up workflows' activities, safe to run again: the order's reads and its expiry's conditional update; the
 * day's statement (each transfer recorded once by its transaction id, the report rewritten).
 */
export function createTopupActivities(deps: {
  db: Db;
  temporal?: Client | null;
  config?: TopupDeps['config'];
  logger?: Logger;
}): TopupActivities & TopupStatementActivities {
  return {
    async topupStatus(orderId) {
      return (await orderById(deps.db, orderId))?.status ?? null;
    },
    async expireTopup(orderId) {
      return expireOrder(deps.db, orderId);
    },
    async pullTopupStatement(day) {
      if (!deps.config) throw new Error('the statement activity needs the top-up settings');
      const svc = topupService({
        db: deps.db,
        config: deps.config,
        temporal: deps.temporal ?? null,
        logger: deps.logger,
      });
      const listed = await readSepayStatement(deps.config.topups, day);
      const report = await runStatement(deps.db, day, listed, svc.record);
      deps.logger?.info({ ...report }, 'top-up statement');
      return report;
    },
  };
}
