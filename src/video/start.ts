import type { Client } from '@temporalio/client';
import type { defineSearchAttributeKey } from '@temporalio/common';
import type { Config } from '../config';
import { SEARCH_ATTRIBUTES } from './searchAttributes';
import { workflowTiming } from './settings';
import { WORKFLOW_TYPE, type VideoJobInput } from './workflowContract';
import type { VideoJob } from './jobs';
import { isTemporalError } from './temporalErrors';

/** Starting a job's workflow: used by POST /v1/videos and by the reconciler (same id, so at most one runs). */

type Keys = Record<'account' | 'model' | 'status', ReturnType<typeof defineSearchAttributeKey<'KEYWORD'>>>;
let keys: Keys | null = null;

/** The typed search-attribute keys, built on first use (the SDK's common module is loaded with the client). */
async function searchKeys(): Promise<Keys> {
  if (keys) return keys;
  const { defineSearchAttributeKey, SearchAttributeType } = await import('@temporalio/common');
  keys = {
    account: defineSearchAttributeKey(SEARCH_ATTRIBUTES.account, SearchAttributeType.KEYWORD),
    model: defineSearchAttributeKey(SEARCH_ATTRIBUTES.model, SearchAttributeType.KEYWORD),
    status: defineSearchAttributeKey(SEARCH_ATTRIBUTES.status, SearchAttributeType.KEYWORD),
  };
  return keys;
}

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

/** The namespace lacks the gateway's search attributes (a Temporal server set up without them). */
function isMissingSearchAttribute(e: unknown): boolean {
  return (
    /search attribute/i.test((e as Error)?.message ?? '') &&
    /not defined|unknown|no mapping|invalid/i.test((e as Error)?.message ?? '')
  );
}

let searchAttributesAvailable = true;

/**
 * Starts the workflow `video-<jobId>`. Returns 'started', or 'exists' when a workflow with that id already ran
 * (the id reuse policy refuses a second one, so a job's money is never handled by two workflows).
 */
export async function startVideoWorkflow(client: Client, config: Config, job: VideoJob): Promise<'started' | 'exists'> {
  const keys = await searchKeys();
  const start = (withAttributes: boolean) =>
    client.workflow.start(WORKFLOW_TYPE, {
      taskQueue: config.temporalTaskQueue,
      workflowId: job.workflowId,
      args: [workflowInput(job, config, withAttributes)],
      workflowIdReusePolicy: 'REJECT_DUPLICATE',
      ...(withAttributes
        ? {
            typedSearchAttributes: [
              { key: keys.account, value: job.accountId },
              { key: keys.model, value: job.model },
              { key: keys.status, value: 'submitted' },
            ],
          }
        : {}),
    });
  try {
    await start(searchAttributesAvailable);
    return 'started';
  } catch (e) {
    if (isTemporalError(e, 'WorkflowExecutionAlreadyStartedError')) return 'exists';
    if (searchAttributesAvailable && isMissingSearchAttribute(e)) {
      // Still start the job; operators lose the attribute search until the namespace registers them.
      searchAttributesAvailable = false;
      try {
        await start(false);
        return 'started';
      } catch (e2) {
        if (isTemporalError(e2, 'WorkflowExecutionAlreadyStartedError')) return 'exists';
        throw e2;
      }
    }
    throw e;
  }
}
