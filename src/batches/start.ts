import type { Client } from '@temporalio/client';
import type { defineSearchAttributeKey } from '@temporalio/common';
import type { Config } from '../config';
import { SEARCH_ATTRIBUTES } from '../video/searchAttributes';
import { isTemporalError } from '../video/temporalErrors';
import { batchTiming } from './settings';
import { BATCH_WORKFLOW_TYPE, type BatchJobInput } from './workflowContract';
import type { Batch } from './repo';

/**
 * Starting a batch's workflow (`batch-<batchId>`), with the search attributes operators find it by in the Temporal
 * UI: the same ones as video jobs (GatewayAccountId, GatewayModel, GatewayJobStatus, the status kept current by
 * the workflow), told apart by the workflow type (`WorkflowType = 'batchJobWorkflow'`).
 */

type Keys = Record<'account' | 'model' | 'status', ReturnType<typeof defineSearchAttributeKey<'KEYWORD'>>>;
let keys: Keys | null = null;
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

let searchAttributesAvailable = true;
const isMissingSearchAttribute = (e: unknown) =>
  /search attribute/i.test((e as Error)?.message ?? '') &&
  /not defined|unknown|no mapping|invalid/i.test((e as Error)?.message ?? '');

/** Starts `batch-<id>`; 'exists' when it already ran (the id reuse policy refuses a second one). */
export async function startBatchWorkflow(client: Client, config: Config, b: Batch): Promise<'started' | 'exists'> {
  const k = await searchKeys();
  const start = (attrs: boolean) =>
    client.workflow.start(BATCH_WORKFLOW_TYPE, {
      taskQueue: config.temporalTaskQueue,
      workflowId: b.workflowId,
      args: [
        {
          batchId: b.id,
          accountId: b.accountId,
          expiresAtMs: b.expiresAt.getTime(),
          timing: batchTiming(config.batches),
          statusSearchAttribute: attrs ? SEARCH_ATTRIBUTES.status : null,
        } satisfies BatchJobInput,
      ],
      workflowIdReusePolicy: 'REJECT_DUPLICATE',
      ...(attrs
        ? {
            typedSearchAttributes: [
              { key: k.account, value: b.accountId },
              { key: k.model, value: b.model },
              { key: k.status, value: b.status },
            ],
          }
        : {}),
    });
  try {
    await start(searchAttributesAvailable);
    return 'started';
  } catch (e) {
    if (isTemporalError(e, 'WorkflowExecutionAlreadyStartedError')) return 'exists';
    if (!searchAttributesAvailable || !isMissingSearchAttribute(e)) throw e;
    searchAttributesAvailable = false;
    try {
      await start(false);
      return 'started';
    } catch (e2) {
      if (isTemporalError(e2, 'WorkflowExecutionAlreadyStartedError')) return 'exists';
      throw e2;
    }
  }
}
