import { SseDecoder, type EventSourceMessage } from './upstreamEvents';
import { encodeSseEvent } from './wire';

/**
 * An upstream SSE byte stream cut into regions of whole events, each with its decoded events, for the native
 * pass-through streams: a region goes to the client as the upstream's own bytes (comments and all) or, when one of
 * its events must change (an error to redact, a final response to correct), re-encoded. Only a partial event at
 * the end of a network chunk waits for the next chunk, and a client can do nothing with half an event anyway.
 *
 * Regions end at the blank lines upstreams write (LF LF, CRLF CRLF); a stream written with bare CRs only would come
 * out whole at its end, correct but late.
 */

export interface SseRegion {
  /** The upstream's bytes of these events. */
  raw: Buffer;
  events: EventSourceMessage[];
}

const LF_LF = Buffer.from('\n\n');
const CRLF_CRLF = Buffer.from('\r\n\r\n');
const EMPTY = Buffer.alloc(0);

/** Where the last whole event of `buf` ends (just after its blank line), or -1. */
function lastBoundary(buf: Buffer): number {
  const lf = buf.lastIndexOf(LF_LF);
  const crlf = buf.lastIndexOf(CRLF_CRLF);
  return Math.max(lf < 0 ? -1 : lf + 2, crlf < 0 ? -1 : crlf + 4);
}

export class SseRegions {
  private readonly dec = new SseDecoder();
  private held: Buffer | null = null;

  /** The whole events this chunk completes, with their bytes; null while the chunk only continues a partial event. */
  push(chunk: Uint8Array): SseRegion | null {
    const buf = this.held
      ? Buffer.concat([this.held, chunk])
      : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    const cut = lastBoundary(buf);
    if (cut < 0) {
      this.held = buf;
      return null;
    }
    this.held = cut < buf.length ? buf.subarray(cut) : null;
    const raw = cut < buf.length ? buf.subarray(0, cut) : buf;
    // raw ends at a blank line (ASCII), so the decoder is left with no partial event or character.
    return { raw, events: this.dec.push(raw) };
  }

  /** At the end of the stream: what is still held (an event the upstream left unterminated), if anything. */
  end(): SseRegion | null {
    const raw = this.held ?? EMPTY;
    this.held = null;
    const events = raw.length ? [...this.dec.push(raw), ...this.dec.end()] : this.dec.end();
    return raw.length || events.length ? { raw, events } : null;
  }
}

/**
 * The region as the client gets it: its raw bytes, unless `change` returns new data for one of its events; then
 * the region re-encoded (its comments, keep-alives only, dropped). `change` sees each event once, in order.
 */
export function rewriteRegion(region: SseRegion, change: (ev: EventSourceMessage) => string | null): Buffer | string {
  const events = region.events;
  for (let i = 0; i < events.length; i++) {
    const data = change(events[i]);
    if (data === null || data === events[i].data) continue;
    // The first change: the events before it as they were, this one changed, and the later ones checked too.
    let out =
      events
        .slice(0, i)
        .map((ev) => encodeSseEvent(ev))
        .join('') + encodeSseEvent(events[i], data);
    for (let j = i + 1; j < events.length; j++) out += encodeSseEvent(events[j], change(events[j]) ?? events[j].data);
    return out;
  }
  return region.raw;
}
