import type { Span } from '@opentelemetry/api';
import type { Client } from '@temporalio/client';
import type { Config } from '../../config';
import { startJobWorkflow } from '../workflowStart';
import { batchTiming } from './settings';
import { BATCH_WORKFLOW_TYPE, type BatchJobInput } from './workflowContract';
import type { Batch } from './repo';

/**
 * Starting a batch's workflow (`batch-<batchId>`), with the search attributes operators find it by in the Temporal
 * UI: the same ones as video jobs (GatewayAccountId, GatewayModel, GatewayJobStatus, the status kept current by
 * the workflow), told apart by the workflow type (`WorkflowType = 'batchJobWorkflow'`).
 */

/** Starts `batch-<id>`; 'exists' when it already ran (the id reuse policy refuses a second one). */
export function startBatchWorkflow(
  client: Client,
  config: Config,
  b: Batch,
  trace?: Span | null,
): Promise<'started' | 'exists'> {
  return startJobWorkflow(client, {
    trace,
    workflowType: BATCH_WORKFLOW_TYPE,
    taskQueue: config.temporalTaskQueue,
    workflowId: b.workflowId,
    input: (statusAttribute): BatchJobInput => ({
      batchId: b.id,
      accountId: b.accountId,
      expiresAtMs: b.expiresAt.getTime(),
      timing: batchTiming(config.batches),
      statusSearchAttribute: statusAttribute,
    }),
    accountId: b.accountId,
    model: b.model,
    status: b.status,
  });
}
