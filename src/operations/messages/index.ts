import type { Caller, OperationDeps } from '../../modelCall';
import type { ModelConfig } from '../../catalog';
import { type MessagesRequest, translateInput, estimateInputTokens } from '../../translate';
import type { CountTokensRequest } from '../../schemas';
import type { MessagesUpstream } from '../../providers';
import { servedNatively } from '../../providers';
import { nativeMessages, type AnthropicHeaders } from './native';
import { translatedMessages } from './translated';
import { throughCache } from '../../cache';
import { messagesUpstreamOf } from '../../modelCall';

/**
 * POST /v1/messages and /v1/messages/count_tokens, without HTTP: a model served over Anthropic Messages (an
 * `anthropic` provider, Claude on `bedrock` or `vertex`) is passed through natively (./native.ts: body and SSE as
 * produced, usage read as it passes); any other chat model is translated to chat and back (./translated.ts). The
 * router and the batch executor (a message batch's requests) both call createMessage.
 */

export { validateMessages, validateCountTokens } from '../../schemas';
export type { AnthropicHeaders } from './native';

/** The upstream serving the model natively over Messages (Anthropic, Claude on Bedrock or Vertex), if any. */
function nativeAdapter(deps: OperationDeps, model: ModelConfig): MessagesUpstream | null {
  if (!servedNatively(deps.catalog.provider(model).kind, model, 'messages')) return null;
  return messagesUpstreamOf(deps, model);
}

export async function createMessage(
  caller: Caller,
  deps: OperationDeps,
  model: ModelConfig,
  req: MessagesRequest,
  headers: AnthropicHeaders,
): Promise<void> {
  // The Anthropic version and beta change the answer: they are part of the cache key.
  const extra = { version: headers.version, beta: headers.beta ?? null };
  const body = req as unknown as Record<string, unknown>;
  caller.promptCache = { anthropic: req };
  await throughCache(caller, deps, { operation: 'messages', model, body, extra }, async (c) => {
    const native = nativeAdapter(deps, model);
    if (native) await nativeMessages(c, deps, model, native, req, headers);
    else await translatedMessages(c, deps, model, req);
  });
}

/** The upstream's count on an Anthropic provider; elsewhere the documented estimate (see tokenEstimate.ts). */
export async function countMessageTokens(
  caller: Caller,
  deps: OperationDeps,
  model: ModelConfig,
  req: CountTokensRequest,
  headers: AnthropicHeaders,
): Promise<void> {
  const native = nativeAdapter(deps, model);
  if (!native?.countTokens) {
    caller.out.json({ input_tokens: translateInput(() => estimateInputTokens(req, model)) });
    return;
  }
  const res = await native.countTokens(JSON.stringify({ ...req, model: model.upstreamModel }), headers);
  const body = Buffer.from(await res.body.arrayBuffer());
  caller.out.raw(body, { status: res.status, type: res.contentType });
}
