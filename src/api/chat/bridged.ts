import { redactorFor } from '../../catalog/redact';
import type { AppDeps } from '../deps';
import type { Ctx } from '../middleware';
import { ApiError } from '../../errors';
import { openAIBody } from '../errors';
import type { ModelConfig } from '../../catalog/catalog';
import type { ChatChunk, ChatCompletion } from '../../translate/chatTypes';
import { bridgeChatRequest } from '../../translate/chatBridgeRequest';
import { UpstreamAborted } from '../../providers/openai';
import { StreamUsage } from '../../billing/meter';
import { UpstreamStreamError } from '../../providers/chatBackends';
import { RoutedBackend } from '../../routing/routedBackend';
import { estimatedUsage, fromChatUsage } from '../../billing/tokenUsage';
import { costComment, setCostHeaders } from '../costReport';
import { translateInput } from '../../translate/translateInput';
import { reserve } from '../reserve';
import { SseSink } from '../../sse/clientSink';
import { SSE_DONE, sseEvent } from '../../sse/wire';

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

export async function bridgedChat(ctx: Ctx, deps: AppDeps, model: ModelConfig, body: ChatBody): Promise<void> {
  const chat = translateInput(() => bridgeChatRequest(body, model.upstreamModel));
  // Through the router: retries and fallbacks until an upstream answers (src/routing).
  const backend = new RoutedBackend(deps.providers, deps.catalog, deps.router, model, chat);
  const meter = await reserve(ctx, deps, model.id, OPERATION, backend.maxCost, backend.maxTokens);
  backend.recorder = meter;
  const sink = new SseSink(ctx);
  const upstream = async <T>(call: () => Promise<T>): Promise<T | null> => {
    try {
      return await call();
    } catch (e) {
      if (!(e instanceof UpstreamAborted)) throw e; // errorHandler cancels the reservation with the error's status
      meter.cancel({}, 499);
      ctx.respond = false; // the client left; nobody to answer
      return null;
    }
  };
  if (body.stream !== true) {
    const c: ChatCompletion | null = await upstream(() => backend.complete(sink.signal));
    if (!c) return;
    meter.settleTokens(
      backend.answered.pricing,
      c.usage ? fromChatUsage(c.usage) : estimatedUsage(backend.payloadBytes, JSON.stringify(c.choices).length),
    );
    setCostHeaders(ctx.res, meter);
    ctx.body = c;
    return;
  }
  const batches = await upstream(() => backend.stream(sink.signal));
  if (!batches) return;
  const wantsUsage = body.stream_options?.include_usage === true;
  const created = Math.floor(Date.now() / 1000);
  const usage = new StreamUsage(backend.payloadBytes);
  sink.open();
  let failed = false;
  try {
    for await (const batch of batches) {
      let out = '';
      for (const chunk of batch as ChatChunk[]) {
        if (usage.observeChat(chunk) && !wantsUsage) continue;
        if (!chunk.created) chunk.created = created;
        out += sseEvent(JSON.stringify(chunk));
      }
      if (out && !(await sink.write(out))) break;
    }
  } catch (e) {
    if (!sink.clientGone) {
      failed = true;
      deps.logger.warn({ reqId: meter.id, err: (e as Error).message }, 'bridged chat upstream stream failed');
      const message =
        e instanceof UpstreamStreamError
          ? redactorFor(deps.catalog)(e.message)
          : 'The upstream provider ended the stream early.';
      await sink.write(
        sseEvent(JSON.stringify(openAIBody(new ApiError(502, message, 'upstream_error', null, 'upstream_error')))),
      );
    }
  }
  meter.settleTokens(backend.answered.pricing, usage.usageTokens(), sink.clientGone ? 499 : failed ? 502 : 200);
  // The cost goes last (a cut stream is billed too), then [DONE] unless the stream failed.
  if (!sink.clientGone) await sink.write(costComment(meter) + (failed ? '' : SSE_DONE));
  sink.end();
}
