import type { Client } from '@temporalio/client';
import { TOPUP_STATEMENT_SCHEDULE_ID, TOPUP_STATEMENT_WORKFLOW_TYPE, type StatementInput } from './workflowContract';

/**
 * The daily statement's Temporal schedule: at 01:00 in Vietnam (18:00 UTC), a run that reads the day before.
 * Created once; an existing schedule is left as an operator may have changed it.
 */
export async function ensureStatementSchedule(client: Client, taskQueue: string, prefix = ''): Promise<string> {
  const scheduleId = `${prefix}${TOPUP_STATEMENT_SCHEDULE_ID}`;
  const args: [StatementInput] = [{}];
  try {
    await client.schedule.create({
      scheduleId,
      spec: { calendars: [{ hour: 18, minute: 0 }] },
      action: {
        type: 'startWorkflow',
        workflowType: TOPUP_STATEMENT_WORKFLOW_TYPE,
        args,
        taskQueue,
        workflowId: scheduleId,
      },
    });
  } catch (e) {
    if ((e as Error).name !== 'ScheduleAlreadyRunning') throw e;
  }
  return scheduleId;
}
