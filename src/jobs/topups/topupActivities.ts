import type { Db } from '../../db/pool';
import { expireOrder, orderById } from './repo';
import type { TopupActivities } from './workflowContract';

/** The top-up workflow's activities: reads and the expiry's conditional update, safe to run again. */
export function createTopupActivities(deps: { db: Db }): TopupActivities {
  return {
    async topupStatus(orderId) {
      return (await orderById(deps.db, orderId))?.status ?? null;
    },
    async expireTopup(orderId) {
      return expireOrder(deps.db, orderId);
    },
  };
}
