import type { Client } from '@temporalio/client';
import type { Catalog } from '../catalog/catalog';
import { isReconciled } from './reconcile';
import { RECONCILE_WORKFLOW_TYPE, type ReconcileInput } from './workflowContract';

/**
 * One Temporal schedule per reconciled provider (`<prefix>reconcile-<provider>`): daily at 01:00 UTC, a run that
 * reconciles the day before. Created once; an existing schedule is left as the operator may have changed it.
 */
export async function ensureReconcileSchedules(
  client: Client,
  catalog: Catalog,
  taskQueue: string,
  prefix = '',
): Promise<string[]> {
  const ids: string[] = [];
  for (const p of catalog.providers.values()) {
    if (!isReconciled(p)) continue;
    const scheduleId = `${prefix}reconcile-${p.id}`;
    const args: [ReconcileInput] = [{ provider: p.id }];
    try {
      await client.schedule.create({
        scheduleId,
        spec: { calendars: [{ hour: 1, minute: 0 }] },
        action: {
          type: 'startWorkflow',
          workflowType: RECONCILE_WORKFLOW_TYPE,
          args,
          taskQueue,
          workflowId: scheduleId,
        },
      });
    } catch (e) {
      if ((e as Error).name !== 'ScheduleAlreadyRunning') throw e;
    }
    ids.push(scheduleId);
  }
  return ids;
}
