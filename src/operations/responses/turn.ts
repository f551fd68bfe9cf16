import type { Caller, OperationDeps } from '../../modelCall';
import type { ModelConfig } from '../../catalog';
import type { ResponseObject, ResponsesItem, ResponsesRequest } from '../../translate';
import { fromResponsesUsage, type Estimate, type TokenUsage } from '../../modelCall';
import { isResponseId, saveResponse } from './storedResponses';

/**
 * One turn of POST /v1/responses, what both paths (native.ts, translated.ts) share: the request and how it is
 * stored.
 */

export interface Turn {
  req: ResponsesRequest;
  model: ModelConfig;
  history: ResponsesItem[];
  /** This turn's new input items (what is stored with the response). */
  input: ResponsesItem[];
  store: boolean;
  /** The id the response is stored under when it is not the answer's own (a background response's, issued at POST). */
  id?: string;
}

/**
 * A turn checked, routed (native or translated) and estimated, not yet run: `estimate` is what its call may cost
 * at most; `execute` opens the call with it and runs it for `caller` (the client's, or a background response's
 * workflow's: src/backgroundResponses/headless.ts).
 */
export interface PreparedTurn {
  readonly estimate: Estimate;
  execute(caller: Caller): Promise<void>;
}

/**
 * Stores the turn when asked to. False when it was asked to and the response is not stored, so GET
 * /v1/responses/{id} will not find it: the answer must then say `store: false`. That is a response without a
 * storable id, one neither completed nor incomplete (failed, cancelled: nothing to continue), or a failed insert.
 */
export async function storeTurn(
  caller: Caller,
  deps: Pick<OperationDeps, 'db' | 'logger'>,
  t: Turn,
  response: Record<string, unknown> | null,
): Promise<boolean> {
  if (!t.store) return true;
  if (!response || typeof response.id !== 'string' || !isResponseId(response.id)) return false;
  if (response.status !== 'completed' && response.status !== 'incomplete') return false;
  const id = t.id ?? response.id;
  const saved = { ...response, id, previous_response_id: t.req.previous_response_id ?? null, store: true };
  try {
    await saveResponse(deps.db, caller.principal.accountId, {
      id,
      previousResponseId: t.req.previous_response_id ?? null,
      model: t.model.id,
      input: t.input,
      response: saved,
    });
    return true;
  } catch (e) {
    // The answer is still good; only its continuation is lost. Never fail the request for it.
    deps.logger.error({ reqId: caller.requestId, err: (e as Error).message }, 'storing response failed');
    return false;
  }
}

/** The upstream's usage of a response object, if it reported one. */
export function usageOf(r: ResponseObject): TokenUsage | null {
  const u = r?.usage;
  if (!u || typeof u.input_tokens !== 'number' || typeof u.output_tokens !== 'number') return null;
  return fromResponsesUsage(u);
}
