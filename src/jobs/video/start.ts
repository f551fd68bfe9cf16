import type { Span } from '@opentelemetry/api';
import type { Client } from '@temporalio/client';
import type { Config } from '../../config';
import { SEARCH_ATTRIBUTES } from '../searchAttributes';
import { workflowTiming } from './settings';
import { WORKFLOW_TYPE, type VideoJobInput } from './workflowContract';
import type { VideoJob } from './repo';
import { startJobWorkflow } from '../workflowStart';

/** Starting a job's workflow: used by POST /v1/videos and by the reconciler (same id, so at most one runs). */

export function workflowInput(job: VideoJob, config: Config, searchAttributes: boolean): VideoJobInput {
  return {
    jobId: job.id,
    holdId: job.holdId,
    accountId: job.accountId,
    model: job.model,
    seconds: job.seconds,
    pricePerSecond: job.pricePerSecond,
    maxCostVnd: job.maxCostVnd,
    returnLastFrame: job.request.returnLastFrame,
    createdAtMs: job.createdAt.getTime(),
    timing: workflowTiming(config.video),
    statusSearchAttribute: searchAttributes ? SEARCH_ATTRIBUTES.status : null,
  };
}

/** Starts the workflow `video-<jobId>`: 'started', or 'exists' when a workflow with that id already ran. */
export function startVideoWorkflow(
  client: Client,
  config: Config,
  job: VideoJob,
  trace?: Span | null,
): Promise<'started' | 'exists'> {
  return startJobWorkflow(client, {
    trace,
    workflowType: WORKFLOW_TYPE,
    taskQueue: config.temporalTaskQueue,
    workflowId: job.workflowId,
    input: (statusAttribute) => workflowInput(job, config, statusAttribute !== null),
    accountId: job.accountId,
    model: job.model,
    status: 'submitted',
  });
}
