import { redactorFor } from '../catalog/redact';
import type { AppDeps } from './deps';
import type { ChatChunk, ChatCompletion } from '../translate/chatTypes';
import type { SseSink } from '../sse/clientSink';
import { UpstreamStreamError } from '../providers/chatBackends';
import type { RoutedBackend } from '../routing/routedBackend';
import { StreamUsage, type Meter } from '../billing/meter';
import { costComment } from './costReport';
import { failureStatus } from './upstream';

/**
 * The translated paths' shared steps (messages, Gemini): the routed upstream call with the reservation cancelled
 * if no upstream answers, and a chat stream relayed through an interface's translator, settled on what it carried.
 */

/** Turns chat chunks into an interface's wire text. */
export interface StreamTranslator {
  push(chunk: ChatChunk): string;
  /** The upstream ended normally: whatever is held. */
  end(): string;
  /** The upstream failed mid-stream: the interface's error. */
  fail(message: string): string;
  /** The last words, given the cost comment. */
  close(costComment: string): string;
}

/** The routed call; no upstream answering cancels the reservation. */
export async function routedCall<T>(meter: Meter, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (e) {
    meter.cancel({}, failureStatus(e));
    throw e;
  }
}

export function routedComplete(backend: RoutedBackend, meter: Meter, signal: AbortSignal): Promise<ChatCompletion> {
  return routedCall(meter, () => backend.complete(signal));
}

/** Streams the upstream's chunks through the translator as they arrive; settles at the answering model's prices. */
export async function relayTranslated(
  deps: AppDeps,
  backend: RoutedBackend,
  meter: Meter,
  sink: SseSink,
  tr: StreamTranslator,
  headers?: Record<string, string>,
): Promise<void> {
  const batches = await routedCall<AsyncIterable<ChatChunk[]>>(meter, () => backend.stream(sink.signal));
  sink.open(headers);
  const usage = new StreamUsage(backend.payloadBytes);
  let failed = false;
  try {
    for await (const batch of batches) {
      let out = '';
      for (const chunk of batch) {
        usage.observeChat(chunk);
        out += tr.push(chunk);
      }
      if (out && !(await sink.write(out))) break;
    }
    if (!sink.clientGone) await sink.write(tr.end());
  } catch (e) {
    if (!sink.clientGone) {
      failed = true;
      deps.logger.warn({ reqId: meter.id, err: (e as Error).message }, 'translated upstream stream failed');
      const message =
        e instanceof UpstreamStreamError
          ? redactorFor(deps.catalog)(e.message)
          : 'The upstream provider stream was interrupted.';
      await sink.write(tr.fail(message));
    }
  }
  meter.settleTokens(backend.answered.pricing, usage.usageTokens(), sink.clientGone ? 499 : failed ? 502 : 200);
  if (!sink.clientGone) await sink.write(tr.close(costComment(meter)));
  sink.end();
}
