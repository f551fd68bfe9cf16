import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import type { AppDeps } from '../operations/deps';
import type { AccountBilling, Caller } from '../modelCall';
import { reserveAhead } from '../modelCall';
import type { ModelConfig } from '../catalog/catalog';
import type { ResponsesRequest } from '../translate/responsesTypes';
import { prepareResponse } from '../operations/responses/create';
import { ApiError, badRequest, conflict } from '../errors';
import { isTemporalError } from '../jobs/temporalErrors';
import * as repo from './repo';
import { startBackgroundWorkflow } from './start';
import { BACKGROUND_CANCEL_SIGNAL } from './workflowContract';

/**
 * POST /v1/responses with `background: true`, and cancelling one. The POST runs the responses operation's prepare
 * step (prepareResponse: every rule the synchronous route checks before spending is the route's, not a copy), admits
 * the request against the key's rate limits, and places the response's hold with its row at the estimate (402 and
 * 429 there, nothing started); the workflow runs the execute step. The POST calls no upstream and reserves nothing
 * from the credit lease.
 */

export function jobsClient(deps: Pick<AppDeps, 'temporal' | 'config'>): Client {
  if (!deps.temporal) {
    const why =
      deps.config.temporalAddress === 'off'
        ? 'this API process serves synchronous operations only (TEMPORAL_ADDRESS=off)'
        : 'the job scheduler (Temporal) is not connected';
    throw new ApiError(503, `Background responses are unavailable: ${why}.`, 'server_error', null, 'unavailable');
  }
  return deps.temporal;
}

export async function createBackgroundResponse(
  caller: Caller & { billing: AccountBilling },
  deps: AppDeps,
  model: ModelConfig,
  req: ResponsesRequest,
): Promise<repo.BackgroundRow> {
  const client = jobsClient(deps);
  if (req.store === false)
    throw badRequest('Background responses must be stored: remove store: false.', 'store', 'invalid_value');
  const request: Record<string, unknown> = { ...req };
  delete request.background;
  delete request.stream;
  // The route's own steps before spending (validation, output caps, the continued conversation, the estimate over
  // every deployment that may answer), then the key's rate limits: nothing is called upstream, nothing reserved.
  const prepared = await prepareResponse(caller, deps, model, { ...(request as ResponsesRequest), stream: false });
  // Admitted against the key's rate limits (its tokens stay counted at the estimate: the worker that runs it cannot
  // correct them), then the response's hold placed with its row at the estimate (402 and 429 there).
  const id = repo.newResponseId();
  const row = await reserveAhead(caller, model, prepared.estimate, async (maxCostVnd) => {
    const p = caller.principal;
    try {
      return await repo.createWithHold(deps.db, {
        id,
        accountId: p.accountId,
        apiKeyId: p.keyId,
        model: model.id,
        request,
        holdId: randomUUID(),
        maxCostVnd,
        maxInFlight: deps.config.backgroundResponses.maxInFlightPerKey,
      });
    } catch (e) {
      if (e instanceof repo.TooManyInFlight) {
        deps.metrics.limitRefusals.inc({ limit: 'background' });
        throw new ApiError(
          429,
          `This API key has ${e.limit} background responses in flight, its limit: wait for one to end.`,
          'requests',
          null,
          'rate_limit_exceeded',
        );
      }
      throw e;
    }
  });
  // The workflow runs the response (prepared again from the stored request, then executed on the hold).
  return start(deps, client, caller, row);
}

async function start(
  deps: AppDeps,
  client: Client,
  caller: Caller,
  row: repo.BackgroundRow,
): Promise<repo.BackgroundRow> {
  try {
    await startBackgroundWorkflow(client, deps.config, row, caller.span);
  } catch (e) {
    deps.logger.error({ id: row.id, err: (e as Error).message }, 'could not start background response workflow');
    await repo.endResponse(deps.db, row.id, {
      status: 'failed',
      response: null,
      error: { code: 'scheduling_failed', message: 'The response could not be scheduled; nothing was charged.' },
      usage: null,
      cost: 0,
      attempt: null,
    });
    throw new ApiError(
      503,
      'The response could not be scheduled; nothing was charged. Please retry.',
      'server_error',
      null,
      'unavailable',
    );
  }
  void repo
    .markWorkflowStarted(deps.db, row.id)
    .catch((e) => deps.logger.warn({ id: row.id, err: (e as Error).message }, 'could not record workflow start'));
  return row;
}

/**
 * Cancels a response that has not ended: the workflow cancels its run (the upstream call stops, what it delivered
 * is billed, the rest released). Waits a moment for `cancelled`, so the answer usually shows it.
 */
export async function cancelBackgroundResponse(
  deps: Pick<AppDeps, 'db' | 'temporal' | 'config'>,
  row: repo.BackgroundRow,
  opts: { wait: boolean } = { wait: true },
): Promise<repo.BackgroundRow> {
  if (repo.isFinal(row.status)) {
    if (row.status === 'cancelled') return row;
    throw conflict(`Cannot cancel a response with status '${row.status}'.`, 'response_not_cancellable');
  }
  await repo.requestCancel(deps.db, row.id);
  try {
    await jobsClient(deps).workflow.getHandle(row.workflowId).signal(BACKGROUND_CANCEL_SIGNAL);
  } catch (e) {
    if (!isTemporalError(e, 'WorkflowNotFoundError')) throw e;
  }
  if (!opts.wait) return row;
  const until = Date.now() + deps.config.backgroundResponses.cancelWaitMs;
  let now = row;
  while (Date.now() < until && !repo.isFinal(now.status)) {
    await new Promise((r) => setTimeout(r, 50));
    now = (await repo.getResponse(deps.db, row.id)) ?? now;
  }
  return now;
}

/** The Response object as clients read it: the final one once known, else the request's shell in its status. */
export function responseView(row: repo.BackgroundRow): Record<string, unknown> {
  const req = row.request;
  const base = row.response ?? {
    id: row.id,
    object: 'response',
    created_at: Math.floor(row.createdAt.getTime() / 1000),
    model: req.model,
    output: [],
    usage: null,
    error: null,
    incomplete_details: null,
    instructions: req.instructions ?? null,
    max_output_tokens: req.max_output_tokens ?? null,
    metadata: req.metadata ?? {},
    previous_response_id: req.previous_response_id ?? null,
    temperature: req.temperature ?? null,
    tools: req.tools ?? [],
    parallel_tool_calls: req.parallel_tool_calls ?? true,
    tool_choice: req.tool_choice ?? 'auto',
    top_p: req.top_p ?? null,
    store: true,
  };
  return {
    ...base,
    id: row.id,
    status: row.status,
    background: true,
    ...(row.status === 'failed' && row.error ? { error: row.error } : {}),
  };
}
