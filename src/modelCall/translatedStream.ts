import { redactorFor } from '../catalog';
import type { OperationDeps } from './caller';
import type { ChatChunk, ChatCompletion } from '../translate';
import type { SseSink } from '../sse';
import { UpstreamStreamError } from '../providers';
import { CLIENT_CLOSED } from '../net';
import { StreamUsage } from './meter';
import type { RoutedBackend } from './routedBackend';
import type { RoutedCall } from './routedCall';
import type { HeldTry } from '../observability';

/**
 * The translated paths' shared steps (messages, responses, Gemini, bridged chat): the routed upstream call of a
 * request in chat form, and a chat stream relayed through an interface's translator, settled once on what it carried.
 */

/** Turns chat chunks into an interface's wire text. */
export interface StreamTranslator {
  /** The first words, once the upstream answered (before any chunk). */
  start?(): string;
  push(chunk: ChatChunk): string;
  /**
   * After each upstream batch is pushed: the text held back until then, written after the batch's own (the responses
   * path holds its events until the final turn is stored, so the final event can say whether it was).
   */
  afterBatch?(): Promise<string>;
  /** The upstream ended normally: whatever is held. */
  end(): string | Promise<string>;
  /** The upstream failed mid-stream: the interface's error (`message` null for a transport failure). */
  fail(message: string | null): string;
  /** The last words, given the cost comment. */
  close(costComment: string): string;
}

/** What a translated chunk tells the try's span: its text, finish reason and model. */
function traceChunk(held: HeldTry, chunk: ChatChunk): void {
  const c = chunk.choices?.[0];
  const text = c?.delta?.content;
  held.chat(typeof text === 'string' ? text : '', c?.finish_reason, chunk.model);
}

/** The whole answer of the first deployment (or fallback) that gives one. */
export function routedComplete(call: RoutedCall, backend: RoutedBackend): Promise<ChatCompletion> {
  return call.run((t) => backend.forTry(t).complete(call.tryOptions));
}

/** Streams the upstream's chunks through the translator as they arrive; settles at the answering model's prices. */
export async function relayTranslated(
  deps: OperationDeps,
  call: RoutedCall,
  backend: RoutedBackend,
  sink: SseSink,
  tr: StreamTranslator,
  headers?: Record<string, string>,
): Promise<void> {
  // The try's span (while traced) lasts until the stream ends: the chunks below tell it what passed.
  const batches = await call.runStream((t) => backend.forTry(t).stream(call.tryOptions));
  const held = call.held;
  sink.open(headers);
  const usage = new StreamUsage(backend.payloadBytes);
  let failed = false;
  try {
    if (tr.start) await sink.write(tr.start());
    for await (const batch of batches) {
      let out = '';
      for (const chunk of batch) {
        usage.observeChat(chunk);
        if (held) traceChunk(held, chunk);
        out += tr.push(chunk);
      }
      if (tr.afterBatch) out += await tr.afterBatch();
      if (out && !(await sink.write(out))) break;
    }
    if (!sink.clientGone) {
      const out = await tr.end();
      if (out) await sink.write(out);
    }
  } catch (e) {
    if (!sink.clientGone) {
      failed = true;
      deps.logger.warn({ reqId: call.meter.id, err: (e as Error).message }, 'translated upstream stream failed');
      await sink.write(tr.fail(e instanceof UpstreamStreamError ? redactorFor(deps.catalog)(e.message) : null));
    }
  }
  // A stream the upstream breaks off after its first byte is not retried (the client has it) but cools its deployment.
  if (failed) call.streamCut();
  call.settle(usage.usageTokens(), sink.clientGone ? CLIENT_CLOSED : failed ? 502 : 200);
  if (!sink.clientGone) await sink.write(tr.close(call.costComment()));
  sink.end();
}
