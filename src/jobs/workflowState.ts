import type { Client } from '@temporalio/client';
import { isTemporalError } from './temporalErrors';

/**
 * Where a job's workflow stands, as every reconciler asks it: still running, closed (with how: completed, failed,
 * terminated, timed out...), or missing (never started, or its history is gone, so its id is free to start again).
 */
export type WorkflowState = { state: 'running' } | { state: 'closed'; how: string } | { state: 'missing' };

export async function workflowState(temporal: Client, workflowId: string): Promise<WorkflowState> {
  try {
    const d = await temporal.workflow.getHandle(workflowId).describe();
    return d.status.name === 'RUNNING' ? { state: 'running' } : { state: 'closed', how: d.status.name.toLowerCase() };
  } catch (e) {
    if (isTemporalError(e, 'WorkflowNotFoundError')) return { state: 'missing' };
    throw e;
  }
}
