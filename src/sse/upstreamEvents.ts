import { createParser, type EventSourceMessage, type EventSourceParser } from 'eventsource-parser';

export type { EventSourceMessage };

/**
 * Push-based server-sent-events decoder over eventsource-parser: feed it the upstream's network chunks as they
 * arrive, get back the events each chunk completed (an event split across chunks comes out with the chunk that
 * ends it). Synchronous and allocation-light, so a proxy can forward every chunk's events in one write.
 */
export class SseDecoder {
  private readonly text = new TextDecoder('utf-8');
  private readonly parser: EventSourceParser;
  private pending: EventSourceMessage[] = [];

  constructor() {
    this.parser = createParser({
      onEvent: (e) => {
        this.pending.push(e);
      },
    });
  }

  /** The events completed by this chunk (often none or one; several when the upstream batches). */
  push(chunk: Uint8Array | string): EventSourceMessage[] {
    this.parser.feed(typeof chunk === 'string' ? chunk : this.text.decode(chunk, { stream: true }));
    return this.take();
  }

  /** At end of stream: an unterminated last event, if the upstream ended without the blank line. */
  end(): EventSourceMessage[] {
    // The parser drops an event the stream did not end with its blank line (reset's `consume` parses the line, but
    // dispatches nothing); the gateway counts it (it may carry the usage), so two line ends close it. After a
    // stream that ended cleanly they are empty lines, which dispatch nothing.
    this.parser.feed(`${this.text.decode()}\n\n`);
    this.parser.reset();
    return this.take();
  }

  private take(): EventSourceMessage[] {
    if (this.pending.length === 0) return NO_EVENTS;
    const out = this.pending;
    this.pending = [];
    return out;
  }
}

const NO_EVENTS: EventSourceMessage[] = [];

/** Iterates a byte stream as batches of SSE events (one batch per network chunk that completed any). */
export async function* sseBatches(body: AsyncIterable<Uint8Array | string>): AsyncGenerator<EventSourceMessage[]> {
  const dec = new SseDecoder();
  for await (const chunk of body) {
    const events = dec.push(chunk);
    if (events.length) yield events;
  }
  const tail = dec.end();
  if (tail.length) yield tail;
}
