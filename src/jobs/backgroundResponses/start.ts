import type { Span } from '@opentelemetry/api';
import type { Client } from '@temporalio/client';
import type { Config } from '../../config';
import { startJobWorkflow } from '../workflowStart';
import { backgroundRunTaskQueue, backgroundTiming } from './settings';
import { BACKGROUND_WORKFLOW_TYPE, type BackgroundInput } from './workflowContract';
import type { BackgroundRow } from './repo';

/**
 * Starting a background response's workflow (`bgresp-<id>`) on the job engine, with the search attributes
 * operators find it by (GatewayAccountId, GatewayModel, GatewayJobStatus kept current by the workflow), told apart
 * from other jobs by `WorkflowType = 'backgroundResponseWorkflow'`. Used by POST and by the reconciler.
 */
export function startBackgroundWorkflow(
  client: Client,
  config: Config,
  r: BackgroundRow,
  trace?: Span | null,
): Promise<'started' | 'exists'> {
  return startJobWorkflow(client, {
    trace,
    workflowType: BACKGROUND_WORKFLOW_TYPE,
    taskQueue: config.temporalTaskQueue,
    workflowId: r.workflowId,
    input: (statusAttribute): BackgroundInput => ({
      responseId: r.id,
      accountId: r.accountId,
      timing: backgroundTiming(config.backgroundResponses),
      statusSearchAttribute: statusAttribute,
      runTaskQueue: backgroundRunTaskQueue(config),
    }),
    accountId: r.accountId,
    model: r.model,
    status: r.status,
  });
}
