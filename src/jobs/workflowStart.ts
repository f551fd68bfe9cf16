import type { Client } from '@temporalio/client';
import type { defineSearchAttributeKey } from '@temporalio/common';
import { SEARCH_ATTRIBUTES } from './searchAttributes';
import { isTemporalError } from './temporalErrors';
import type { Span } from '@opentelemetry/api';
import { tracer } from '../observability';
import { fairShare } from './fairShare';

/**
 * Starting a job's workflow (a video job or a batch) with the search attributes operators find it by in the Temporal
 * UI. The id reuse policy refuses a second workflow with the same id, so a job's money is never handled by two.
 */

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

/**
 * The namespace lacks the gateway's search attributes (a Temporal server set up without them). The client says so
 * in the cause of its "Failed to start Workflow" (INVALID_ARGUMENT: ... no mapping defined for search attribute ...).
 */
function isMissingSearchAttribute(e: unknown): boolean {
  let x = e as { message?: unknown; cause?: unknown } | null;
  for (let depth = 0; x && depth < 4; depth++, x = x.cause as typeof x) {
    const m = String(x.message ?? '');
    if (/search attribute/i.test(m) && /not defined|unknown|no mapping|invalid/i.test(m)) return true;
  }
  return false;
}

let searchAttributesAvailable = true;

export interface JobWorkflowStart {
  workflowType: string;
  taskQueue: string;
  workflowId: string;
  /** The workflow's input, given the status search attribute it keeps current (null: the namespace lacks it). */
  input(statusAttribute: string | null): unknown;
  accountId: string;
  model: string;
  status: string;
  /** The span of the request that made the job, while tracing is on: the workflow's spans continue its trace. */
  trace?: Span | null;
}

/** Starts the job's workflow: 'started', or 'exists' when a workflow with that id already ran. */
export async function startJobWorkflow(client: Client, s: JobWorkflowStart): Promise<'started' | 'exists'> {
  const k = await searchKeys();
  const withAttributes = searchAttributesAvailable;
  try {
    const start = () =>
      client.workflow.start(s.workflowType, {
        taskQueue: s.taskQueue,
        workflowId: s.workflowId,
        args: [s.input(withAttributes ? SEARCH_ATTRIBUTES.status : null)],
        workflowIdReusePolicy: 'REJECT_DUPLICATE',
        // Its account's fair share of the queues its tasks wait in (src/jobs/fairShare.ts).
        ...fairShare(s.accountId),
        ...(withAttributes
          ? {
              typedSearchAttributes: [
                { key: k.account, value: s.accountId },
                { key: k.model, value: s.model },
                { key: k.status, value: s.status },
              ],
            }
          : {}),
      });
    // The Temporal client interceptor reads the active span as the start is made (GatewayTracing.within).
    await (s.trace && tracer ? tracer.within(s.trace, start) : start());
    return 'started';
  } catch (e) {
    if (isTemporalError(e, 'WorkflowExecutionAlreadyStartedError')) return 'exists';
    if (!withAttributes || !isMissingSearchAttribute(e)) throw e;
    // Still start the job; operators lose the attribute search until the namespace registers them.
    searchAttributesAvailable = false;
    return startJobWorkflow(client, s);
  }
}
