import type { IncomingHttpHeaders } from 'node:http';
import type { Dispatcher } from 'undici';
import type { CancelSignal } from './types';

/**
 * One upstream request whose answer is wanted whole (the JSON operations), through undici's dispatch handler
 * interface: the body's chunks are collected into one Buffer as they arrive. undici's request() builds, for every
 * answer, an AsyncResource, a Readable body stream and a consumer to read it back into a Buffer; on the gateway's
 * busiest path that machinery cost more CPU than the gateway's own auth, validation and metering together.
 */

export interface WholeAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  /** The whole body of a 2xx answer; of any other, its first `errorBodyLimit` bytes (the rest is read and dropped). */
  body: Buffer;
}

export interface WholeRequest {
  path: string;
  headers: Record<string, string>;
  body: string;
  signal?: CancelSignal;
  errorBodyLimit: number;
}

/** Calls `fn` once when the signal fires (at once if it has); returns the unsubscribe function. */
function onCancel(signal: CancelSignal, fn: () => void): () => void {
  if (signal.aborted) {
    fn();
    return () => undefined;
  }
  if ('addEventListener' in signal) {
    signal.addEventListener('abort', fn, { once: true });
    return () => signal.removeEventListener('abort', fn);
  }
  signal.once('abort', fn);
  return () => signal.removeListener('abort', fn);
}

class CancelledError extends Error {
  constructor() {
    super('upstream request cancelled');
    this.name = 'AbortError';
  }
}

class WholeAnswerHandler implements Dispatcher.DispatchHandler {
  private chunks: Buffer[] = [];
  private size = 0;
  private status = 0;
  private headers: IncomingHttpHeaders = {};
  private controller: Dispatcher.DispatchController | null = null;
  private cancelled = false;
  private unsubscribe: (() => void) | null = null;

  constructor(private readonly req: WholeRequest, private readonly resolve: (a: WholeAnswer) => void, private readonly reject: (e: unknown) => void) {
    if (req.signal) {
      this.unsubscribe = onCancel(req.signal, () => {
        this.cancelled = true;
        this.controller?.abort(new CancelledError());
      });
    }
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.cancelled) controller.abort(new CancelledError());
  }

  onResponseStart(_c: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    this.status = statusCode;
    this.headers = headers;
  }

  onResponseData(_c: Dispatcher.DispatchController, chunk: Buffer): void {
    // A 2xx answer is kept whole; an error answer only up to the limit (its message is all we pass on).
    if (this.status >= 200 && this.status < 300) this.chunks.push(chunk);
    else if (this.size < this.req.errorBodyLimit) this.chunks.push(chunk.subarray(0, this.req.errorBodyLimit - this.size));
    this.size += chunk.length;
  }

  onResponseEnd(): void {
    this.unsubscribe?.();
    const body = this.chunks.length === 1 ? this.chunks[0] : Buffer.concat(this.chunks);
    this.resolve({ status: this.status, headers: this.headers, body });
  }

  onResponseError(_c: Dispatcher.DispatchController, err: Error): void {
    this.unsubscribe?.();
    this.reject(err);
  }
}

/** POSTs `req.body` on the dispatcher (a keep-alive Pool) and resolves with the whole answer. */
export function postForWholeAnswer(dispatcher: Dispatcher, req: WholeRequest): Promise<WholeAnswer> {
  return new Promise((resolve, reject) => {
    dispatcher.dispatch({ method: 'POST', path: req.path, headers: req.headers, body: req.body }, new WholeAnswerHandler(req, resolve, reject));
  });
}
