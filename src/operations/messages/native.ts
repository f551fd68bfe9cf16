import {
  type Caller,
  type OperationDeps,
  countImages,
  estimatedUsage,
  estimateNative,
  fromAnthropicUsage,
  messagesUpstream,
  openCall,
  RoutedPayload,
  tokenUsage,
  type AnthropicUsageLike,
  relayNative,
  type NativeEvents,
} from '../../modelCall';
import type { ModelConfig } from '../../catalog';
import { checkOutputCap, redactorFor } from '../../catalog';
import type { MessagesRequest } from '../../translate';
import { formatSse } from '../../sse';
import type { MessagesUpstream } from '../../providers';

/**
 * POST /v1/messages on a model served over Anthropic Messages (an `anthropic` provider, Claude on `bedrock` or
 * `vertex`; deployments may mix them): the body goes upstream as sent (model renamed), the
 * answer and its SSE come back as produced, usage read from the stream as it passes.
 */

const OPERATION = 'messages';

/** The Anthropic request headers passed upstream (the client's anthropic-version and anthropic-beta). */
export interface AnthropicHeaders {
  version: string;
  beta?: string;
}

/** Native pass-through: the body goes upstream as sent (model renamed), the answer comes back as produced. */
export async function nativeMessages(
  caller: Caller,
  deps: OperationDeps,
  model: ModelConfig,
  adapter: MessagesUpstream,
  req: MessagesRequest,
  headers: AnthropicHeaders,
): Promise<void> {
  checkOutputCap(model, 'max_tokens', req.max_tokens);
  const payloads = new RoutedPayload({ ...req, model: model.upstreamModel });
  const bytes = Buffer.byteLength(payloads.payload);
  // Reserved once for the most expensive model and deployment that may answer (retries and fallbacks included).
  const estimate = estimateNative(deps, model, { bytes, maxOutput: req.max_tokens, media: countImages(req.messages) });
  const call = await openCall(caller, deps, model, OPERATION, estimate);
  const upstream = messagesUpstream(adapter);
  if (req.stream !== true) {
    // The body is read inside the try: a connection reset after the headers is retried elsewhere and cools its
    // deployment.
    const res = await call.attempt(upstream, (a, t) => a.messagesWhole(payloads.for(t), headers, call.tryOptions));
    const raw = res.raw;
    let usage: AnthropicUsageLike | null = null;
    try {
      usage = (JSON.parse(raw.toString('utf8')) as { usage?: AnthropicUsageLike }).usage ?? null;
    } catch {}
    call.settle(
      typeof usage?.input_tokens === 'number' && typeof usage.output_tokens === 'number'
        ? fromAnthropicUsage(usage)
        : estimatedUsage(bytes, raw.length),
    );
    call.setCostHeaders();
    caller.out.raw(raw, { status: res.status, type: res.contentType, headers: res.headers });
    return;
  }
  const res = await call.attemptStream(upstream, (a, t) => a.messages(payloads.for(t), headers, call.tryOptions));
  await relayNative(
    { call, sink: caller.out.sink(), logger: deps.logger, name: 'anthropic upstream', headers: res.headers },
    res.body,
    new MessagesEvents(redactorFor(deps.catalog), bytes),
  );
}

/**
 * Anthropic's events as they pass: usage as it stands (message_start's, then each field message_delta repeats:
 * cumulative counts), the delivered text for an estimate, error events redacted for the client.
 */
class MessagesEvents implements NativeEvents {
  readonly finished = false; // the stream ends with the upstream's
  failed = false;
  private usage: AnthropicUsageLike | null = null;
  private delivered = 0;
  private stopped = false;

  constructor(
    private readonly redact: (text: string) => string,
    private readonly bytes: number,
  ) {}

  observe(ev: { data: string }): string | null {
    let e: any;
    try {
      e = JSON.parse(ev.data);
    } catch {
      return null;
    }
    if (e?.type === 'message_start') {
      this.usage = { ...(e.message?.usage ?? {}) };
    } else if (e?.type === 'content_block_delta') {
      const d = e.delta ?? {};
      this.delivered += (d.text?.length ?? 0) + (d.thinking?.length ?? 0) + (d.partial_json?.length ?? 0);
    } else if (e?.type === 'message_delta') {
      for (const [k, v] of Object.entries(e.usage ?? {}))
        if (v !== null && v !== undefined) (this.usage ??= {})[k as keyof AnthropicUsageLike] = v as never;
    } else if (e?.type === 'message_stop') this.stopped = true;
    else if (e?.type === 'error') {
      this.failed = true;
      return this.redact(ev.data);
    }
    return null;
  }

  bill() {
    const usage = this.usage;
    const complete = this.stopped && typeof usage?.input_tokens === 'number' && typeof usage.output_tokens === 'number';
    if (complete) return { usage: fromAnthropicUsage(usage!), complete };
    const estimate = estimatedUsage(this.bytes, this.delivered);
    if (typeof usage?.input_tokens !== 'number') return { usage: estimate, complete };
    // Cut short after message_start: its input and cache counts are the upstream's; the output is estimated.
    const known = fromAnthropicUsage(usage);
    return {
      usage: tokenUsage({ ...known, output: Math.max(known.output, estimate.output), estimated: true }),
      complete,
    };
  }

  interrupted(thrown: boolean): string | null {
    if (!thrown) return null;
    return formatSse({
      event: 'error',
      data: { type: 'error', error: { type: 'api_error', message: 'The upstream provider stream was interrupted.' } },
    });
  }
}
