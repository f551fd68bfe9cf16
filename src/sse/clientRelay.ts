import type { ServerResponse } from 'node:http';
import { SseDecoder } from './upstreamEvents';
import { SSE_DONE, SSE_HEADERS, sseEvent } from './wire';
import type { StreamSink } from './streamSink';
import { CLIENT_CLOSED } from '../net';

/**
 * The SSE relay of streamed chat and legacy completions: the upstream's chunks are written to the client as they
 * arrive (one write per network chunk, no buffering), the usage-only chunk is dropped unless the client asked for it,
 * and `data: [DONE]` ends the response at once; what the upstream sends after it is read and dropped, so its
 * connection goes back to the pool. Push-based (a StreamSink): the upstream pauses while the client's socket is
 * full. `status` says how the stream ended, for the usage record: 200 complete, 499 client gone, 502 cut by the
 * upstream (an error event it sent is forwarded; a transport failure gets one of ours).
 */

/** The error event for a stream the upstream cut short, in the OpenAI error shape (src/errorBodies.ts openAIBody). */
const CUT_SHORT_EVENT = sseEvent(
  JSON.stringify({
    error: {
      message: 'The upstream provider ended the stream early.',
      type: 'upstream_error',
      param: null,
      code: 'upstream_error',
    },
  }),
);

/**
 * What the relay tells the request's usage counter (billing's StreamUsage) about the events it forwards: content
 * events deferred unparsed (counted only if the upstream's usage never arrives), parsed chunks observed.
 */
export interface RelayUsage {
  defer(data: string): void;
  deferBytes(events: Buffer): void;
  /** True for the usage-only chunk. */
  observeChat(chunk: object): boolean;
  observeCompletion(chunk: object): boolean;
}

export interface RelayOptions {
  kind: 'chat' | 'completion';
  /** Whether the client asked for the usage chunk (stream_options.include_usage); it is stripped otherwise. */
  clientWantsUsage: boolean;
  /**
   * Called once as the stream ends, however it ends, with its status (200 complete, 502 cut by the upstream, 499 the
   * client gone); returns what to write last before the terminator (the request's cost, as an SSE comment).
   */
  end: (status: number) => string;
  /** What an upstream error event's text becomes for the client (without catalog internals: src/catalog/redact.ts). */
  redact?: (text: string) => string;
}

const BLANK_LINE = Buffer.from('\n\n');

/**
 * What makes an event need handling rather than forwarding as is: a usage object, `"error":` or `[DONE]`. Inside JSON
 * strings every quote is escaped, so the unescaped keys can only be keys; `"usage":null` (sent on every chunk by
 * OpenAI with include_usage) is not usage; a `[DONE]` in content text only sends its event down the decoding path,
 * which checks events exactly. Usage is looked for as JSON serialisers write it, compact or with spaces after ':'.
 * One regular expression, because V8 scans it with a skip table, several times faster than four Buffer searches that
 * stop at every quote (docs/benchmarks.md).
 */
const MARKERS = /"error":|\[DONE\]|"usage": *\{/;

/** A content event: forwarded untouched. */
const isPlainEvent = (ev: { data: string }): boolean => !MARKERS.test(ev.data);

/**
 * Where the first event that needs handling may start in a chunk of whole events (-1: none): the chunk's bytes
 * searched as latin1, so offsets are byte offsets.
 */
function firstMarker(buf: Buffer): number {
  return buf.toString('latin1').search(MARKERS);
}

type PlainEvent = { data: string; event?: string };
const NO_EVENTS: PlainEvent[] = [];

/**
 * The events of a chunk of whole events written the plain way (`data: <one line>` + blank line, LF only), without
 * the general decoder; null when the chunk is written any other way (then SseDecoder reads it).
 */
function plainEvents(buf: Buffer): PlainEvent[] | null {
  if (buf.length === 0) return NO_EVENTS;
  if (buf.includes(13 /* \r */)) return null;
  const out: PlainEvent[] = [];
  let at = 0;
  while (at < buf.length) {
    const end = buf.indexOf(BLANK_LINE, at);
    // "data: " (d a t a : space)
    if (
      end < 0 ||
      buf[at] !== 100 ||
      buf[at + 1] !== 97 ||
      buf[at + 2] !== 116 ||
      buf[at + 3] !== 97 ||
      buf[at + 4] !== 58 ||
      buf[at + 5] !== 32
    )
      return null;
    const nl = buf.indexOf(10, at);
    if (nl !== end) return null; // another line (field) in this event
    out.push({ data: buf.toString('utf8', at + 6, end) });
    at = end + 2;
  }
  return out;
}

/** Whether a chunk ends with the blank line that terminates an SSE event. */
function endsAtEventBoundary(b: Buffer): boolean {
  const n = b.length;
  return (
    (n >= 2 &&
      b[n - 1] === 10 &&
      (b[n - 2] === 10 || (n >= 4 && b[n - 2] === 13 && b[n - 3] === 10 && b[n - 4] === 13))) ||
    (n >= 2 && b[n - 1] === 13 && b[n - 2] === 13)
  );
}

export class SseRelay implements StreamSink {
  /** How the stream ended (valid once the upstream call has settled). */
  status = 200;
  /** The general decoder, made on first need (chunks of whole plain events, the usual case, never need it). */
  private dec: SseDecoder | null = null;
  private readonly chat: boolean;
  private upstreamError: unknown = null;
  /** The client's response is complete ([DONE] answered, or the client gone): further bytes are dropped. */
  private closed = false;
  /** A wait for the client's drain is set up (at most one at a time). */
  private awaitingDrain = false;
  /** Whether the bytes so far ended exactly at an event boundary (so a chunk can be forwarded byte for byte). */
  private aligned = true;
  /** The upstream's [DONE] was read. */
  private sawDone = false;

  constructor(
    private readonly res: ServerResponse,
    private readonly gone: { readonly aborted: boolean },
    private readonly acc: RelayUsage,
    private readonly opts: RelayOptions,
  ) {
    this.chat = opts.kind === 'chat';
  }

  start(): void {
    const res = this.res;
    res.writeHead(200, SSE_HEADERS);
    // The client sees the stream open at once even if the first token takes a while; when the upstream's first
    // bytes come with its headers (same network read), the headers go out with them instead: one write, not two.
    queueMicrotask(() => {
      if (!res.headersSent && !res.writableEnded) res.flushHeaders();
    });
  }

  data(buf: Buffer, resume: () => void): boolean {
    if (this.closed) return true;
    if (this.gone.aborted) return this.clientGone();
    const startsAligned = this.aligned;
    this.aligned = endsAtEventBoundary(buf);
    // Whole content events ahead of the first one that needs handling (usage object, error, [DONE]) go out as the
    // upstream's own bytes, not even decoded: their text is counted only if the upstream's usage never arrives.
    // Only the rest (typically the usage chunk and [DONE] arriving with the last tokens) is decoded and inspected.
    let head: Buffer | null = null;
    let rest = buf;
    if (startsAligned) {
      const at = firstMarker(buf);
      if (at < 0 && this.aligned) {
        this.acc.deferBytes(buf);
        return this.written(this.res.write(buf), resume);
      }
      const boundary = at > 0 ? buf.lastIndexOf(BLANK_LINE, at) : -1;
      if (boundary >= 0) {
        head = buf.subarray(0, boundary + 2);
        rest = buf.subarray(boundary + 2);
        this.acc.deferBytes(head);
      }
    }
    // A tail of whole events in the plain form skips the general decoder (whose state it leaves untouched: the
    // tail ends at an event boundary, as the chunk started at one).
    const events = (startsAligned && this.aligned && plainEvents(rest)) || (this.dec ??= new SseDecoder()).push(rest);
    const out = this.rewrite(events);
    if (this.sawDone) return this.answerDone(head, out);
    return this.written(this.writeHeadAndTail(head, out), resume);
  }

  /** The events as the client gets them; stops at [DONE] (nothing follows it in this protocol). */
  private rewrite(events: PlainEvent[]): string {
    let out = '';
    for (const ev of events) {
      if (ev.data === '[DONE]') {
        this.sawDone = true;
        break;
      }
      out += this.rewriteEvent(ev);
    }
    return out;
  }

  /** One event as the client gets it: as sent, redacted (an error), or nothing (usage the client did not ask for). */
  private rewriteEvent(ev: PlainEvent): string {
    const data = ev.data;
    const event = ev.event !== 'message' ? ev.event : undefined;
    if (isPlainEvent(ev)) {
      // A plain content chunk: forward it as is; its text is counted only if the estimate is ever needed.
      this.acc.defer(data);
      return sseEvent(data, event);
    }
    let parsed: any;
    try {
      parsed = JSON.parse(data);
    } catch {
      return sseEvent(data); // not ours to judge: pass it on
    }
    if (parsed && parsed.error) {
      this.upstreamError = parsed.error;
      return sseEvent(this.opts.redact ? this.opts.redact(data) : data);
    }
    const usageOnly = this.chat ? this.acc.observeChat(parsed) : this.acc.observeCompletion(parsed);
    return usageOnly && !this.opts.clientWantsUsage ? '' : sseEvent(data, event);
  }

  /**
   * [DONE] arrived: the client is answered now, in one write with the terminator; the upstream's remaining bytes
   * are read and dropped (the connection is reused). An error event before the [DONE] (vLLM and SGLang send both)
   * means the upstream cut the answer short: it ends as end() ends such a stream, without [DONE].
   */
  private answerDone(head: Buffer | null, out: string): boolean {
    const res = this.res;
    const status = this.upstreamError ? 502 : 200;
    this.closed = true;
    this.status = status;
    if (head) {
      res.cork(); // end() uncorks: head, tail and terminator leave in one syscall
      res.write(head);
    }
    res.end(out + this.trailer(status) + (status === 200 ? SSE_DONE : ''));
    return true;
  }

  /** The raw head and the rewritten tail of a chunk, in one syscall; false when the client's socket is full. */
  private writeHeadAndTail(head: Buffer | null, out: string): boolean {
    const res = this.res;
    if (!head) return out ? res.write(out) : true;
    res.cork();
    let ok = res.write(head);
    if (out) ok = res.write(out);
    res.uncork();
    return ok;
  }

  end(): void {
    if (!this.finishing()) return;
    // An upstream error event was forwarded: the stream ends there, as cut by the upstream.
    this.status = this.upstreamError ? 502 : 200;
    this.res.end(this.upstreamError ? this.trailer(502) : this.trailer(200) + SSE_DONE);
  }

  fail(): void {
    if (!this.finishing()) return;
    // A transport failure mid-stream: an error event (the OpenAI SDK raises it), then the end.
    this.status = 502;
    this.res.write(CUT_SHORT_EVENT);
    this.res.end(this.trailer(502));
  }

  private trailer(status: number): string {
    return this.opts.end(status);
  }

  /** Whether the response is still ours to end (not answered at [DONE], and the client still there). */
  private finishing(): boolean {
    if (this.closed) return false;
    if (this.gone.aborted) {
      this.clientGone();
      return false;
    }
    this.closed = true;
    return true;
  }

  /** The client left: the stream ends here, unanswered (its end hook still runs: the request is billed as it ended). */
  private clientGone(): boolean {
    this.closed = true;
    this.status = CLIENT_CLOSED;
    this.opts.end(CLIENT_CLOSED);
    return true;
  }

  /** After a write: false (pause the upstream) when the client's socket is full, resuming on 'drain'. */
  private written(ok: boolean, resume: () => void): boolean {
    if (ok) return true;
    // The upstream may still deliver what it had buffered before it pauses: one wait for 'drain' serves them all.
    if (this.awaitingDrain) return false;
    this.awaitingDrain = true;
    const res = this.res;
    const go = () => {
      res.off('drain', go);
      res.off('close', go);
      this.awaitingDrain = false;
      resume();
    };
    res.on('drain', go);
    res.on('close', go);
    return false;
  }
}
