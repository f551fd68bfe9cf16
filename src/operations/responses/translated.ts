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
import {
  responsesToChat,
  chatToResponses,
  newId,
  type ResponseShell,
  ChatToResponsesStream,
  type ChatTranslation,
  translateInput,
} from '../../translate';
import { formatSse, type SseEvent } from '../../sse';
import { storeTurn, type PreparedTurn, type Turn } from './turn';

/**
 * POST /v1/responses on any other chat model: responses -> chat (src/translate), sent through the model's chat
 * backend (/chat/completions, or an Anthropic upstream's /v1/messages), and back to a response, streamed event by
 * event.
 */

const OPERATION = 'responses';

/**
 * Any chat model: responses -> chat -> upstream -> chat -> responses (streamed event by event). The request is
 * translated (400 on what cannot be) and estimated here; `execute` runs it.
 */
export function prepareTranslatedResponses(deps: OperationDeps, t: Turn): PreparedTurn {
  const { chat, tools } = translateInput(() =>
    responsesToChat(
      { ...t.req, input: t.input },
      {
        upstreamModel: t.model.upstreamModel,
        maxOutputTokens: t.model.maxOutputTokens,
        reasoning: t.model.reasoning,
        history: t.history,
      },
    ),
  );
  // The backends of every deployment that may answer: retries and fallbacks until an upstream answers (src/modelCall).
  const backend = new RoutedBackend(deps, t.model, chat);
  return { estimate: backend.estimate, execute: (caller) => runTranslated(caller, deps, t, backend, tools) };
}

async function runTranslated(
  caller: Caller,
  deps: OperationDeps,
  t: Turn,
  backend: RoutedBackend,
  tools: ChatTranslation['tools'],
): Promise<void> {
  const bytes = backend.payloadBytes;
  const call = await openCall(caller, deps, t.model, OPERATION, backend.estimate);
  const shell: ResponseShell = {
    id: newId('resp'),
    model: t.req.model,
    createdAt: Math.floor(Date.now() / 1000),
    request: t.req,
  };
  if (t.req.stream !== true) {
    const c = await routedComplete(call, backend);
    const obj = chatToResponses(c, { ...shell, tools });
    call.settle(c.usage ? fromChatUsage(c.usage) : estimatedUsage(bytes, JSON.stringify(obj.output).length));
    call.setCostHeaders();
    caller.out.json((await storeTurn(caller, deps, t, obj)) ? obj : { ...obj, store: false });
    return;
  }
  const tr = new ChatToResponsesStream(shell, tools, { inputTokensEstimate: backend.inputTokensEstimate });
  const sse = (events: SseEvent[]) => events.map(formatSse).join('');
  // Stored before the client sees the final event, so an immediate continuation finds it; a turn that could not
  // be stored says so in that event (it holds tr.final itself, serialised only after this).
  let storing: Promise<void> | null = null;
  const storeFinal = () =>
    (storing ??= (async () => {
      if (tr.final && !(await storeTurn(caller, deps, t, tr.final))) tr.final.store = false;
    })());
  // A batch's events are serialised after storeFinal, which may still set the final event's `store: false`.
  let held: SseEvent[] = [];
  await relayTranslated(deps, call, backend, caller.out.sink(), {
    start: () => sse(tr.start()),
    push: (chunk) => {
      held.push(...tr.push(chunk));
      return '';
    },
    afterBatch: async () => {
      if (tr.done) await storeFinal();
      const out = sse(held);
      held = [];
      return out;
    },
    end: async () => {
      const events = tr.end();
      await storeFinal();
      return sse(events);
    },
    fail: (message) => {
      const events = tr.fail('server_error', message ?? 'The upstream provider stream was interrupted.');
      if (tr.final?.status === 'failed') tr.final.store = false; // a failed turn is not stored (serialised only below)
      return sse(events);
    },
    close: (comment) => comment,
  });
}
