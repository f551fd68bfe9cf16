import {
  type Caller,
  type OperationDeps,
  estimatedUsage,
  fromChatUsage,
  openCall,
  RoutedBackend,
  relayTranslated,
  routedComplete,
} from '../../modelCall';
import { ApiError } from '../../errors';
import { openAIBody } from '../../errorBodies';
import type { ModelConfig } from '../../catalog';
import { type ChatChunk, bridgeChatRequest, translateInput } from '../../translate';
import { SSE_DONE, sseEvent } from '../../sse';

/**
 * POST /v1/chat/completions for a chat model whose upstream does not speak Chat Completions: an Anthropic
 * provider (through the chat <-> Messages bridge) or a Responses-only model (through the chat <-> Responses
 * bridge), the same backends /v1/messages and /v1/responses use. The answer is a chat completion, or chat chunks
 * as the upstream's events arrive; the usage-only chunk reaches the client only with stream_options.include_usage.
 */

const OPERATION = 'chat.completions';

interface ChatBody {
  messages: { role: string; content?: unknown }[];
  stream?: boolean | null;
  stream_options?: { include_usage?: boolean } | null;
  [k: string]: unknown;
}

export async function bridgedChat(
  caller: Caller,
  deps: OperationDeps,
  model: ModelConfig,
  body: ChatBody,
): Promise<void> {
  const chat = translateInput(() => bridgeChatRequest(body, model.upstreamModel));
  // The backends of every deployment that may answer: retries and fallbacks until an upstream answers (src/modelCall).
  const backend = new RoutedBackend(deps, model, chat);
  const call = await openCall(caller, deps, model, OPERATION, backend.estimate);
  if (body.stream !== true) {
    const c = await routedComplete(call, backend);
    call.settle(
      c.usage ? fromChatUsage(c.usage) : estimatedUsage(backend.payloadBytes, JSON.stringify(c.choices).length),
    );
    call.setCostHeaders();
    caller.out.json(c);
    return;
  }
  const wantsUsage = body.stream_options?.include_usage === true;
  const created = Math.floor(Date.now() / 1000);
  let failed = false;
  await relayTranslated(deps, call, backend, caller.out.sink(), {
    push: (chunk) => {
      if (!wantsUsage && usageOnly(chunk)) return '';
      if (!chunk.created) chunk.created = created;
      return sseEvent(JSON.stringify(chunk));
    },
    end: () => '',
    fail: (message) => {
      failed = true;
      const e = new ApiError(
        502,
        message ?? 'The upstream provider ended the stream early.',
        'upstream_error',
        null,
        'upstream_error',
      );
      return sseEvent(JSON.stringify(openAIBody(e)));
    },
    // The cost goes last (a cut stream is billed too), then [DONE] unless the stream failed.
    close: (comment) => comment + (failed ? '' : SSE_DONE),
  });
}

/** The usage-only chunk (no choices), which reaches the client only with stream_options.include_usage. */
function usageOnly(chunk: ChatChunk): boolean {
  return (!Array.isArray(chunk.choices) || chunk.choices.length === 0) && !!chunk.usage;
}
