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
import type { ModelConfig } from '../../catalog';
import {
  type MessagesRequest,
  messagesToChat,
  chatToMessages,
  ChatToMessagesStream,
  translateInput,
} from '../../translate';
import { formatSse, type SseEvent } from '../../sse';

/**
 * POST /v1/messages on any other chat model: messages -> chat (src/translate), sent to the model's upstream
 * through its chat backend (/chat/completions, or /responses for an `api: "responses"` model), and back to
 * messages, event by event when streamed.
 */

const OPERATION = 'messages';

/** Any chat model: messages -> chat -> upstream (chat completions, or /responses) -> messages, event by event. */
export async function translatedMessages(
  caller: Caller,
  deps: OperationDeps,
  model: ModelConfig,
  req: MessagesRequest,
): Promise<void> {
  const { chat, tools } = translateInput(() =>
    // A catalog model carries its translate options (upstream name, output cap, reasoning).
    messagesToChat(req, model),
  );
  // The backends of every deployment that may answer: retries and fallbacks until an upstream answers (src/modelCall).
  const backend = new RoutedBackend(deps, model, chat);
  const bytes = backend.payloadBytes;
  const call = await openCall(caller, deps, model, OPERATION, backend.estimate);
  if (req.stream !== true) {
    const c = await routedComplete(call, backend);
    const msg = chatToMessages(c, { model: req.model, tools });
    call.settle(c.usage ? fromChatUsage(c.usage) : estimatedUsage(bytes, JSON.stringify(msg.content).length));
    call.setCostHeaders();
    caller.out.json(msg);
    return;
  }
  const tr = new ChatToMessagesStream({ model: req.model, tools, inputTokensEstimate: backend.inputTokensEstimate });
  const sse = (events: SseEvent[]) => events.map(formatSse).join('');
  await relayTranslated(deps, call, backend, caller.out.sink(), {
    push: (chunk) => sse(tr.push(chunk)),
    end: () => sse(tr.end()),
    fail: (message) => sse(tr.fail('api_error', message ?? 'The upstream provider stream was interrupted.')),
    close: (comment) => comment,
  });
}
