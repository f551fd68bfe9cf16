import type { Caller, OperationDeps } from '../../modelCall';
import { invalidUpstreamResponse } from '../../errors';
import type { ModelConfig } from '../../catalog';
import { redactorFor } from '../../catalog';
import { usageFromJson } from '../../providers';
import { SseRelay } from '../../sse';
import {
  estimateCompletion,
  estimatedUsage,
  fromChatUsage,
  openaiUpstream,
  openCall,
  requireOpenAIProvider,
  RoutedPayload,
  StreamUsage,
  type RoutedCall,
} from '../../modelCall';

/**
 * A chat or legacy completion on an OpenAI-compatible upstream: the body forwarded as sent (model renamed per
 * deployment), the upper-bound cost reserved once for every candidate that may answer, the answer relayed (JSON as
 * received, or SSE event by event) and settled at the answering model's prices on the upstream's usage.
 */

export interface CompletionBody {
  model: string;
  stream?: boolean | null;
  stream_options?: { include_usage?: boolean } | null;
  max_tokens?: number | null;
  max_completion_tokens?: number | null;
}

export async function forwardCompletion(
  caller: Caller,
  deps: OperationDeps,
  kind: 'chat' | 'completion',
  model: ModelConfig,
  body: CompletionBody,
): Promise<void> {
  // Resolved before funds are reserved: a misconfigured provider is refused with nothing held.
  requireOpenAIProvider(deps, model);
  const stream = body.stream === true;
  const clientWantsUsage = stream && body.stream_options?.include_usage === true;
  // The body is ours (parsed per request): rewrite it in place rather than copy it.
  body.model = model.upstreamModel;
  if (stream)
    body.stream_options = body.stream_options
      ? { ...body.stream_options, include_usage: true }
      : { include_usage: true };
  const payloads = new RoutedPayload(body);
  const payloadBytes = Buffer.byteLength(payloads.payload);
  // Reserved once, for the most expensive model and deployment that may answer (retries and fallbacks included).
  const estimate = estimateCompletion(deps, model, body, payloadBytes);
  const operation = kind === 'chat' ? 'chat.completions' : 'completions';
  const call = await openCall(caller, deps, model, operation, estimate);
  const path = kind === 'chat' ? '/chat/completions' : '/completions';
  if (!stream) {
    const res = await call.attempt(openaiUpstream, (a, t) => a.postJson(path, payloads.for(t), call.tryOptions));
    settleJson(call, res.body, payloadBytes);
    call.setCostHeaders();
    caller.out.bytes(res.body);
    return;
  }
  // The gateway always asks the upstream for usage; the relay drops the usage-only chunk unless the client asked
  // for it. Billing: the upstream's usage if it arrived, else the delivered-text rule of StreamUsage.
  const usage = new StreamUsage(payloadBytes, kind);
  const target = caller.out.relay();
  const relay = new SseRelay(target.res, call.abort, usage, {
    kind,
    clientWantsUsage,
    redact: redactorFor(deps.catalog),
    // The relay ends the stream once, however it ends; the cost goes out as its last comment (before [DONE]).
    end: (status) => {
      target.ended(status); // for the request log and metrics
      call.settle(usage.usageTokens(), status);
      return call.costComment();
    },
  });
  // Tries that fail before the stream starts are retried (the relay is untouched until an upstream answers 2xx).
  await call.attempt(openaiUpstream, (a, t) => a.streamTo(path, payloads.for(t), relay, call.tryOptions));
  target.streaming();
  if (relay.status === 502) call.streamCut();
}

/**
 * A whole answer billed on the upstream's usage or, if it omits it, ceil(bytes/4) prompt and ceil(chars/4)
 * completion tokens over the returned text; an answer that is not JSON is the upstream's fault (502).
 */
function settleJson(call: RoutedCall, body: Buffer, payloadBytes: number): void {
  const usage = usageFromJson(body);
  if (usage) {
    call.settle(fromChatUsage(usage));
    return;
  }
  let json: { choices?: TextChoiceLike[] } | null;
  try {
    json = JSON.parse(body.toString('utf8'));
  } catch {
    call.cancel(502);
    throw invalidUpstreamResponse();
  }
  call.settle(estimatedUsage(payloadBytes, completionCharsOf(json)));
}

interface TextChoiceLike {
  message?: { content?: unknown; tool_calls?: { function?: { arguments?: unknown } }[] };
  text?: unknown;
}

/** Characters of the returned text (content, legacy text, tool-call arguments). */
function completionCharsOf(json: { choices?: TextChoiceLike[] } | null): number {
  let n = 0;
  for (const c of json?.choices ?? []) {
    if (typeof c.text === 'string') n += c.text.length;
    if (typeof c.message?.content === 'string') n += c.message.content.length;
    for (const t of c.message?.tool_calls ?? [])
      if (typeof t.function?.arguments === 'string') n += t.function.arguments.length;
  }
  return n;
}
