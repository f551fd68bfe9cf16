import type { Client } from '@temporalio/client';
import type { Catalog } from '../../catalog';
import { isReconciled } from './reconcile';
import { RECONCILE_WORKFLOW_TYPE, type ReconcileInput } from './workflowContract';

/**
 * Each firing runs, each for its own day: firings missed while Temporal or the workers were down (the catch-up)
 * and a backfill's are buffered and run one after the other, where Temporal's default (skip) would run one and
 * drop the others' days.
 */
// (The policy's name, not @temporalio/client's constant: the API loads this room, and never that package.)
const OVERLAP = 'BUFFER_ALL' as const;

/**
 * One Temporal schedule per reconciled provider (`<prefix>reconcile-<provider>`): daily at 01:00 UTC, a run that
 * reconciles the day before (and the earlier days of its look-back not reconciled yet). Created once; an existing
 * schedule keeps what the operator may have changed, except its overlap policy, which is set to buffer every firing.
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
        policies: { overlap: OVERLAP },
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
      const handle = client.schedule.getHandle(scheduleId);
      if ((await handle.describe()).policies.overlap !== OVERLAP)
        await handle.update((s) => ({ ...s, policies: { ...s.policies, overlap: OVERLAP } }));
    }
    ids.push(scheduleId);
  }
  return ids;
}
