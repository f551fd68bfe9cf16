import { redactorFor } from '../../catalog/redact';
import type { AppDeps } from '../deps';
import type { Ctx } from '../middleware';
import { responsesToChat } from '../../translate/responsesToChat';
import { chatToResponses, newId, type ResponseShell } from '../../translate/chatToResponses';
import { ChatToResponsesStream } from '../../translate/chatStreamToResponses';
import type { ChatChunk, ChatCompletion } from '../../translate/chatTypes';
import { translateInput } from '../../translate/translateInput';
import { formatSse } from '../../sse/translatedEvents';
import { UpstreamStreamError } from '../../providers/chatBackends';
import { RoutedBackend } from '../../routing/routedBackend';
import { tokensFromChars } from '../../billing/pricing';
import { StreamUsage, type Meter } from '../../billing/meter';
import { estimatedUsage, fromChatUsage } from '../../billing/tokenUsage';
import { costComment, setCostHeaders } from '../costReport';
import { reserve } from '../reserve';
import { failureStatus } from '../upstream';
import { storeTurn, type Turn } from './turn';

/**
 * POST /v1/responses on any other chat model: responses -> chat (src/translate), sent through the model's chat
 * backend (/chat/completions, or an Anthropic upstream's /v1/messages), and back to a response, streamed event by event.
 */

const OPERATION = 'responses';

/** Any chat model: responses -> chat -> upstream -> chat -> responses (streamed event by event). */
export async function translatedResponses(ctx: Ctx, deps: AppDeps, t: Turn): Promise<void> {
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
  // Through the router: retries and fallbacks until an upstream answers (src/routing).
  const backend = new RoutedBackend(deps.providers, deps.catalog, deps.router, t.model, chat);
  const bytes = backend.payloadBytes;
  const meter = await reserve(ctx, deps, t.model.id, OPERATION, backend.maxCost, backend.maxTokens);
  backend.recorder = meter;
  const shell: ResponseShell = {
    id: newId('resp'),
    model: t.req.model,
    createdAt: Math.floor(Date.now() / 1000),
    request: t.req,
  };
  if (t.req.stream !== true) {
    let c: ChatCompletion;
    try {
      c = await backend.complete(t.sink.signal);
    } catch (e) {
      meter.cancel({}, failureStatus(e));
      throw e;
    }
    const obj = chatToResponses(c, { ...shell, tools });
    meter.settleTokens(
      backend.answered.pricing,
      c.usage ? fromChatUsage(c.usage) : estimatedUsage(bytes, JSON.stringify(obj.output).length),
    );
    setCostHeaders(ctx.res, meter);
    ctx.body = (await storeTurn(ctx, deps, t, obj)) ? obj : { ...obj, store: false };
    return;
  }
  let batches: AsyncIterable<ChatChunk[]>;
  try {
    batches = await backend.stream(t.sink.signal);
  } catch (e) {
    meter.cancel({}, failureStatus(e));
    throw e;
  }
  // Billed at the prices of the model that answered (a fallback's).
  await streamResponse(
    ctx,
    deps,
    { ...t, model: backend.answered },
    meter,
    batches,
    new ChatToResponsesStream(shell, tools, { inputTokensEstimate: tokensFromChars(bytes) }),
    bytes,
  );
}

/** Translates the upstream's chat chunks into response events as they arrive; stores the turn; settles. */
async function streamResponse(
  ctx: Ctx,
  deps: AppDeps,
  t: Turn,
  meter: Meter,
  batches: AsyncIterable<ChatChunk[]>,
  tr: ChatToResponsesStream,
  bytes: number,
): Promise<void> {
  const sink = t.sink;
  sink.open();
  const usage = new StreamUsage(bytes);
  let failed = false;
  try {
    await sink.write(tr.start().map(formatSse).join(''));
    // Stored before the client sees the final event, so an immediate continuation finds it; a turn that could
    // not be stored says so in that event (it holds tr.final itself, serialised only after this).
    let storing: Promise<void> | null = null;
    const storeFinal = () =>
      (storing ??= (async () => {
        if (tr.final && !(await storeTurn(ctx, deps, t, tr.final))) tr.final.store = false;
      })());
    for await (const batch of batches) {
      const events = [];
      for (const chunk of batch) {
        usage.observeChat(chunk);
        events.push(...tr.push(chunk));
      }
      if (tr.done) await storeFinal();
      const out = events.map(formatSse).join('');
      if (out && !(await sink.write(out))) break;
    }
    if (!sink.clientGone) {
      const events = tr.end();
      await storeFinal();
      const out = events.map(formatSse).join('');
      if (out) await sink.write(out);
    }
  } catch (e) {
    if (!sink.clientGone) {
      failed = true;
      deps.logger.warn({ reqId: meter.id, err: (e as Error).message }, 'translated upstream stream failed');
      const message =
        e instanceof UpstreamStreamError
          ? redactorFor(deps.catalog)(e.message)
          : 'The upstream provider stream was interrupted.';
      const events = tr.fail('server_error', message);
      if (tr.final?.status === 'failed') tr.final.store = false; // a failed turn is not stored (serialised only below)
      await sink.write(events.map(formatSse).join(''));
    }
  }
  meter.settleTokens(t.model.pricing, usage.usageTokens(), sink.clientGone ? 499 : failed ? 502 : 200);
  if (!sink.clientGone) await sink.write(costComment(meter));
  sink.end();
}
