import type { Caller, OperationDeps } from '../../modelCall';
import { notFound } from '../../errors';
import type { ModelConfig } from '../../catalog';
import { type ResponsesItem, type ResponsesRequest, inputItems } from '../../translate';
import { conversationItems } from './storedResponses';
import { prepareNativeResponses } from './native';
import { prepareTranslatedResponses } from './translated';
import type { PreparedTurn, Turn } from './turn';
import { clip } from '../../text';
import { servedNatively } from '../../providers';
import { throughCache } from '../../cache';

/**
 * POST /v1/responses for a validated request on a chat model: `previous_response_id` expanded here into the stored
 * conversation's items (the upstream never sees the id, so a stored response can be continued on any model; an
 * unknown id is a 404), then the native path (a model marked `api: "responses"` on an OpenAI provider) or the
 * translated one.
 */
export async function createResponse(
  caller: Caller,
  deps: OperationDeps,
  model: ModelConfig,
  req: ResponsesRequest,
  /** `id`: the id to store the response under (a background response's; see Turn.id). */
  opts: { id?: string } = {},
): Promise<void> {
  // A background response (its own id, its hold) is never cached; a request on the client's behalf may be.
  if (opts.id || (req as { background?: unknown }).background === true) return respond(caller, deps, model, req, opts);
  const body = req as unknown as Record<string, unknown>;
  caller.promptCache = { cacheKey: body.prompt_cache_key, prompt: [body.instructions, body.input] };
  await throughCache(caller, deps, { operation: 'responses', model, body }, (c) => respond(c, deps, model, req, opts));
}

async function respond(
  caller: Caller,
  deps: OperationDeps,
  model: ModelConfig,
  req: ResponsesRequest,
  opts: { id?: string },
): Promise<void> {
  const prepared = await prepareResponse(caller, deps, model, req, opts);
  await prepared.execute(caller);
}

/**
 * The steps of POST /v1/responses before anything is spent, without I/O upstream: the request validated (output
 * caps, the provider, what cannot be translated), `previous_response_id` expanded (404), the path chosen (native
 * or translated) and the most it may cost estimated. A background response's POST runs this alone (its hold is
 * placed with the estimate: src/backgroundResponses/service.ts); its workflow runs `execute`.
 */
export async function prepareResponse(
  caller: Pick<Caller, 'principal'>,
  deps: OperationDeps,
  model: ModelConfig,
  req: ResponsesRequest,
  /** `id`: the id to store the response under (a background response's; see Turn.id). */
  opts: { id?: string } = {},
): Promise<PreparedTurn> {
  const history = await historyOf(deps, caller.principal.accountId, req.previous_response_id);
  const turn: Turn = {
    req,
    model,
    history,
    input: inputItems(req.input),
    store: req.store !== false,
    ...(opts.id ? { id: opts.id } : {}),
  };
  return servedNatively(deps.catalog.provider(model).kind, model, 'responses')
    ? prepareNativeResponses(deps, turn)
    : prepareTranslatedResponses(deps, turn);
}

/** The items of the conversation a request continues (none without previous_response_id). */
async function historyOf(
  deps: Pick<OperationDeps, 'db'>,
  accountId: string,
  previousId: string | null | undefined,
): Promise<ResponsesItem[]> {
  if (!previousId) return [];
  const items = await conversationItems(deps.db, accountId, previousId);
  if (!items)
    throw notFound(
      `Previous response with id '${clip(previousId)}' not found.`,
      'previous_response_not_found',
      'previous_response_id',
    );
  return items;
}
