import { redactorFor } from '../../catalog/redact';
import type { AppDeps } from '../deps';
import type { Ctx } from '../middleware';
import type { ModelConfig } from '../../catalog/catalog';
import type { MessagesRequest } from '../../translate/anthropicTypes';
import { messagesToChat } from '../../translate/messagesToChat';
import { chatToMessages } from '../../translate/chatToMessages';
import { ChatToMessagesStream } from '../../translate/chatStreamToMessages';
import type { ChatChunk, ChatCompletion } from '../../translate/chatTypes';
import { translateInput } from '../../translate/translateInput';
import { formatSse } from '../../sse/translatedEvents';
import type { SseSink } from '../../sse/clientSink';
import { UpstreamStreamError } from '../../providers/chatBackends';
import { RoutedBackend } from '../../routing/routedBackend';
import { tokensFromChars } from '../../billing/pricing';
import { StreamUsage } from '../../billing/meter';
import { estimatedUsage, fromChatUsage } from '../../billing/tokenUsage';
import { costComment, setCostHeaders } from '../costReport';
import { reserve } from '../reserve';
import { failureStatus } from '../upstream';

/**
 * POST /v1/messages on any other chat model: messages -> chat (src/translate), sent to the model's upstream
 * through its chat backend (/chat/completions, or /responses for an `api: "responses"` model), and back to
 * messages, event by event when streamed.
 */

const OPERATION = 'messages';

/** Any chat model: messages -> chat -> upstream (chat completions, or /responses) -> messages, event by event. */
export async function translatedMessages(ctx: Ctx, deps: AppDeps, model: ModelConfig, req: MessagesRequest, sink: SseSink): Promise<void> {
  const { chat, tools } = translateInput(() => messagesToChat(req, { upstreamModel: model.upstreamModel, maxOutputTokens: model.maxOutputTokens, reasoning: model.reasoning }));
  // Through the router: retries and fallbacks until an upstream answers (src/routing).
  const backend = new RoutedBackend(deps.providers, deps.catalog, deps.router, model, chat);
  const bytes = backend.payloadBytes;
  const meter = await reserve(ctx, deps, model.id, OPERATION, backend.maxCost, backend.maxTokens);
  backend.recorder = meter;
  if (req.stream !== true) {
    let c: ChatCompletion;
    try {
      c = await backend.complete(sink.signal);
    } catch (e) {
      meter.cancel({}, failureStatus(e));
      throw e;
    }
    const msg = chatToMessages(c, { model: req.model, tools });
    meter.settleTokens(backend.answered.pricing, c.usage ? fromChatUsage(c.usage) : estimatedUsage(bytes, JSON.stringify(msg.content).length));
    setCostHeaders(ctx.res, meter);
    ctx.body = msg;
    return;
  }
  let batches: AsyncIterable<ChatChunk[]>;
  try {
    batches = await backend.stream(sink.signal);
  } catch (e) {
    meter.cancel({}, failureStatus(e));
    throw e;
  }
  sink.open();
  const usage = new StreamUsage(bytes);
  const tr = new ChatToMessagesStream({ model: req.model, tools, inputTokensEstimate: tokensFromChars(bytes) });
  let failed = false;
  try {
    for await (const batch of batches) {
      let out = '';
      for (const chunk of batch) {
        usage.observeChat(chunk);
        for (const e of tr.push(chunk)) out += formatSse(e);
      }
      if (out && !(await sink.write(out))) break;
    }
    if (!sink.clientGone) await sink.write(tr.end().map(formatSse).join(''));
  } catch (e) {
    if (!sink.clientGone) {
      failed = true;
      deps.logger.warn({ reqId: meter.id, err: (e as Error).message }, 'translated upstream stream failed');
      const message = e instanceof UpstreamStreamError ? redactorFor(deps.catalog)(e.message) : 'The upstream provider stream was interrupted.';
      await sink.write(tr.fail('api_error', message).map(formatSse).join(''));
    }
  }
  meter.settleTokens(backend.answered.pricing, usage.usageTokens(), sink.clientGone ? 499 : failed ? 502 : 200);
  if (!sink.clientGone) await sink.write(costComment(meter));
  sink.end();
}
