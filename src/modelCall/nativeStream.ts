import type { Logger } from '../observability';
import type { TokenUsage } from '../billing';
import { CLIENT_CLOSED } from '../net';
import type { SseSink, EventSourceMessage } from '../sse';
import { rewriteRegion, SseRegions, type SseRegion } from '../sse';
import type { RoutedCall } from './routedCall';

/**
 * The one relay of a native pass-through stream (/v1/messages on an Anthropic upstream, /v1/responses on a
 * Responses upstream): the upstream's events go to the client as they complete, as its own bytes unless the
 * interface's reader changes one (an error redacted, a final response corrected); usage is read as they pass; the
 * request settles once, however the stream ends, and its cost goes out as the last comment.
 */

/** One interface's reading of its upstream's events. */
export interface NativeEvents {
  /** Reads one event as it passes; returns the data the client gets instead of the upstream's, or null. */
  observe(ev: EventSourceMessage): string | null | Promise<string | null>;
  /** The answer is whole (its terminal event read): the stream ends once that event is written. */
  readonly finished: boolean;
  /** An error event was read: the upstream cut the answer short. */
  readonly failed: boolean;
  /** The bill as the events so far tell it; `complete` when it is the upstream's own, whole usage. */
  bill(): { usage: TokenUsage; complete: boolean };
  /**
   * What the client gets when the upstream breaks off (`thrown`) or stops without its terminal event; null for
   * nothing (the stream then counts as complete).
   */
  interrupted(thrown: boolean): string | null;
}

export interface NativeRelay {
  call: RoutedCall;
  sink: SseSink;
  logger: Logger;
  /** Names the interface in the log line of a broken stream. */
  name: string;
  /** Headers sent with the stream's 200 (the upstream's request id, rate limits). */
  headers?: Record<string, string>;
}

export async function relayNative(r: NativeRelay, body: AsyncIterable<Uint8Array>, ev: NativeEvents): Promise<void> {
  const { call, sink } = r;
  sink.open(r.headers);
  const regions = new SseRegions();
  let cut = false;
  const finish = async (status: number) => {
    const bill = ev.bill();
    call.settle(bill.usage, bill.complete ? 200 : status);
    if (!sink.clientGone && !sink.ended) await sink.write(call.costComment());
    sink.end();
  };
  const forward = async (region: SseRegion | null): Promise<boolean> => {
    if (!region) return true;
    const changed = new Map<EventSourceMessage, string>();
    for (const e of region.events) {
      const data = await ev.observe(e);
      if (data !== null) changed.set(e, data);
    }
    if (sink.ended) return true; // the answer is complete: let the upstream finish its response (connection reuse)
    if (!(await sink.write(rewriteRegion(region, (e) => changed.get(e) ?? null)))) return false;
    if (ev.finished) await finish(200);
    return true;
  };
  let thrown = false;
  const held = call.held; // the try's span while traced: it ends with the stream
  try {
    for await (const chunk of body) {
      if (held) held.data(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
      if (!(await forward(regions.push(chunk)))) break;
    }
    if (!sink.clientGone) await forward(regions.end()); // an unterminated last event still counts
  } catch (e) {
    thrown = true;
    if (!sink.clientGone) r.logger.warn({ reqId: call.meter.id, err: (e as Error).message }, `${r.name} stream failed`);
  }
  if (!ev.finished && !sink.clientGone) {
    const text = ev.interrupted(thrown);
    if (text !== null) {
      cut = true;
      await sink.write(text);
    }
  }
  const failed = cut || ev.failed;
  await finish(sink.clientGone ? CLIENT_CLOSED : failed ? 502 : 200); // a no-op once finished at the terminal event
  if (failed && !sink.clientGone) call.streamCut();
}
