import type { Caller, OperationDeps } from '../../modelCall';
import type { ModelConfig } from '../../catalog';
import { checkOutputCap } from '../../catalog';
import { servedNatively } from '../../providers';
import type { ChatCompletionBody } from '../../schemas';
import { bridgedChat } from './bridged';
import { forwardCompletion, type CompletionBody } from './forward';
import { throughCache } from '../../cache';

/**
 * POST /v1/chat/completions and POST /v1/completions, without HTTP: the body (validated by the route's schema,
 * re-exported here) forwarded to the model's OpenAI-compatible upstream (./forward.ts) or, for chat on another
 * protocol, through a bridge (./bridged.ts). Unknown fields pass through to the upstream. The router and the batch
 * executor both call these.
 */

export { validateChatCompletion, validateCompletion } from '../../schemas';

/** An output-token count above the model's cap is refused, as the upstream would (before anything is reserved). */
function checkMaxTokens(
  model: ModelConfig,
  body: { max_tokens?: number | null; max_completion_tokens?: number | null },
): void {
  for (const param of ['max_completion_tokens', 'max_tokens'] as const) checkOutputCap(model, param, body[param]);
}

/**
 * Not async, as completions below: the call's promise is the cache's (one async layer fewer per request; a bad
 * max_tokens throws where its caller awaits, as a rejection would).
 */
export function chatCompletions(
  caller: Caller,
  deps: OperationDeps,
  model: ModelConfig,
  body: ChatCompletionBody,
): Promise<void> {
  checkMaxTokens(model, body);
  caller.promptCache = { cacheKey: body.prompt_cache_key, prompt: body.messages };
  return throughCache(caller, deps, { operation: 'chat.completions', model, body }, (c) => {
    // Chat models on another protocol go through the bridges /v1/messages and /v1/responses use.
    if (!servedNatively(deps.catalog.provider(model).kind, model, 'chat')) return bridgedChat(c, deps, model, body);
    return forwardCompletion(c, deps, 'chat', model, body);
  });
}

export function completions(
  caller: Caller,
  deps: OperationDeps,
  model: ModelConfig,
  body: CompletionBody,
): Promise<void> {
  checkMaxTokens(model, body);
  caller.promptCache = { prompt: [(body as { prompt?: unknown }).prompt] };
  return throughCache(
    caller,
    deps,
    { operation: 'completions', model, body: body as unknown as Record<string, unknown> },
    (c) => forwardCompletion(c, deps, 'completion', model, body),
  );
}
