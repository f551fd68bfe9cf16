import type { IncomingHttpHeaders } from 'node:http';
import { Pool, type Dispatcher } from 'undici';
import type { RequestAbort } from '../net';
import type { StreamSink } from '../sse';
import type { Span } from '@opentelemetry/api';
import { tracer, withTraceparent, type UpstreamWatch } from '../observability';

/**
 * Upstream requests through undici's dispatch handler interface, for the gateway's busiest paths: a JSON answer
 * collected into one Buffer, or an SSE answer handed chunk by chunk to a sink that writes it to the client.
 * undici's request() builds, for every answer, an AsyncResource, a Readable body stream and (to read it) a consumer
 * or an async iterator; on these paths that machinery cost more CPU than the gateway's own auth, validation and
 * metering together.
 */

export interface WholeAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  /** The whole body of a 2xx answer; of any other, its first `errorBodyLimit` bytes (the rest is read and dropped). */
  body: Buffer;
}

export interface UpstreamPost {
  path: string;
  headers: Record<string, string>;
  body: string;
  abort?: RequestAbort;
  /** The try's span (CallOptions.trace): its traceparent goes upstream, and it watches the answer when sampled. */
  trace?: Span | null;
  /** Bytes kept of a non-2xx answer's body (its message is all that is passed on). */
  errorBodyLimit: number;
}

const isOk = (status: number) => status >= 200 && status < 300;

/**
 * Cancellation and the non-2xx case, shared by both handlers: a 2xx answer goes to `okStart`/`okData`/`okEnd`; any
 * other is read to its end (so the connection is reused), keeping its first bytes, and settles the call with it.
 */
abstract class PostHandler implements Dispatcher.DispatchHandler {
  protected status = 0;
  protected headers: IncomingHttpHeaders = {};
  protected controller: Dispatcher.DispatchController | null = null;
  private errorChunks: Buffer[] = [];
  private errorBytes = 0;
  private aborted: Error | null = null;
  private readonly unsubscribe: (() => void) | null = null;
  /** The try's span watching the answer (first chunk, finish reasons), while tracing is on. */
  private readonly watch: UpstreamWatch | null;

  constructor(
    protected readonly req: UpstreamPost,
    protected readonly resolve: (a: WholeAnswer | null) => void,
    protected readonly reject: (e: unknown) => void,
  ) {
    this.watch = tracer ? tracer.watchUpstream(req.body, req.trace) : null;
    const abort = req.abort;
    if (abort) {
      this.unsubscribe = abort.onAbort(() => {
        this.aborted = abort.reason!;
        this.controller?.abort(this.aborted);
      });
    }
  }

  protected abstract okStart(): void;
  protected abstract okData(chunk: Buffer): void;
  protected abstract okEnd(): void;
  protected abstract failed(err: Error): void;

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.aborted) controller.abort(this.aborted);
  }

  onResponseStart(_c: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    this.status = statusCode;
    this.headers = headers;
    this.watch?.start(statusCode, headers);
    if (isOk(statusCode)) this.okStart();
  }

  onResponseData(_c: Dispatcher.DispatchController, chunk: Buffer): void {
    if (isOk(this.status)) {
      this.watch?.data(chunk);
      return this.okData(chunk);
    }
    const limit = this.req.errorBodyLimit;
    if (this.errorBytes < limit) this.errorChunks.push(chunk.subarray(0, limit - this.errorBytes));
    this.errorBytes += chunk.length;
  }

  onResponseEnd(): void {
    this.unsubscribe?.();
    this.watch?.end();
    if (isOk(this.status)) return this.okEnd();
    this.resolve({ status: this.status, headers: this.headers, body: Buffer.concat(this.errorChunks) });
  }

  onResponseError(_c: Dispatcher.DispatchController, err: Error): void {
    this.unsubscribe?.();
    this.failed(err);
  }
}

class WholeAnswerHandler extends PostHandler {
  private chunks: Buffer[] = [];

  protected okStart(): void {}

  protected okData(chunk: Buffer): void {
    this.chunks.push(chunk);
  }

  protected okEnd(): void {
    this.resolve({
      status: this.status,
      headers: this.headers,
      body: this.chunks.length === 1 ? this.chunks[0] : Buffer.concat(this.chunks),
    });
  }

  protected failed(err: Error): void {
    this.reject(err);
  }
}

class StreamingHandler extends PostHandler {
  private started = false;
  private readonly resume = () => this.controller?.resume();

  constructor(
    req: UpstreamPost,
    private readonly sink: StreamSink,
    resolve: (a: WholeAnswer | null) => void,
    reject: (e: unknown) => void,
  ) {
    super(req, resolve, reject);
  }

  protected okStart(): void {
    this.started = true;
    this.sink.start(this.status, this.headers);
  }

  protected okData(chunk: Buffer): void {
    if (!this.sink.data(chunk, this.resume)) this.controller?.pause();
  }

  protected okEnd(): void {
    this.sink.end();
    this.resolve(null);
  }

  protected failed(err: Error): void {
    if (!this.started) return this.reject(err);
    this.sink.fail(err);
    this.resolve(null);
  }
}

/** POSTs on the dispatcher (a keep-alive Pool) and resolves with the whole answer, whatever its status. */
export function postForWholeAnswer(dispatcher: Dispatcher, req: UpstreamPost): Promise<WholeAnswer> {
  return new Promise((resolve, reject) => {
    dispatcher.dispatch(
      { method: 'POST', path: req.path, headers: withTraceparent(req.headers, req.trace), body: req.body },
      new WholeAnswerHandler(req, resolve as (a: WholeAnswer | null) => void, reject),
    );
  });
}

/**
 * POSTs on the dispatcher and streams a 2xx answer into `sink`. Resolves with null once the sink has had its `end`
 * or `fail`; with the answer (status, headers, first bytes of the body) when it was not a 2xx; rejects when the
 * request failed before any answer (the sink is untouched then).
 */
export function postStreamingTo(
  dispatcher: Dispatcher,
  req: UpstreamPost,
  sink: StreamSink,
): Promise<WholeAnswer | null> {
  return new Promise((resolve, reject) => {
    dispatcher.dispatch(
      { method: 'POST', path: req.path, headers: withTraceparent(req.headers, req.trace), body: req.body },
      new StreamingHandler(req, sink, resolve, reject),
    );
  });
}

/**
 * The keep-alive pool to one upstream origin, the same for every provider kind: `connections` sockets (the
 * UPSTREAM_CONNECTIONS setting), one request per socket at a time, idle sockets kept 30 s, and `timeoutMs` for the
 * answer's headers and between its body's chunks (a stream may run longer in all).
 */
export function upstreamPool(
  origin: string,
  timeoutMs: number,
  opts: { connections?: number; connectTimeoutMs?: number } = {},
): Pool {
  return new Pool(origin, {
    connections: opts.connections ?? 256,
    pipelining: 1,
    keepAliveTimeout: 30_000,
    keepAliveMaxTimeout: 600_000,
    connect: { timeout: opts.connectTimeoutMs ?? 10_000 },
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
  });
}
