import type { ServerResponse } from 'node:http';
import { SSE_HEADERS } from './wire';

/** The parts of the request's (Koa) context a sink writes through. */
export interface SseSinkContext {
  res: ServerResponse;
  status: number;
  respond?: boolean;
  state: { requestId: string };
}

/**
 * The client side of a streamed answer (messages, responses, Gemini, bridged chat): writes go straight to the
 * socket as they are produced (no buffering, Koa's own response handling is bypassed) and respect backpressure.
 * `abort` is the request's (src/net/abort.ts): it aborts when the client goes away.
 */
export class SseSink {
  private opened = false;
  /** Sees every write that reaches the client (the response cache's recorder, src/cache/recorder.ts). */
  tap: ((data: string | Uint8Array) => void) | null = null;

  constructor(
    private readonly ctx: SseSinkContext,
    readonly abort: { readonly aborted: boolean },
  ) {}

  get clientGone(): boolean {
    return this.abort.aborted;
  }

  get isOpen(): boolean {
    return this.opened;
  }

  /** Sends the 200 status and SSE headers (plus `extra`) now. */
  open(extra: Record<string, string> = {}): void {
    if (this.opened) return;
    this.opened = true;
    const ctx = this.ctx;
    ctx.status = 200; // for logs and metrics: Koa does not send this response itself
    ctx.respond = false;
    ctx.res.writeHead(200, {
      ...SSE_HEADERS,
      ...extra,
      'x-request-id': ctx.state.requestId,
      'request-id': ctx.state.requestId,
    });
    ctx.res.flushHeaders();
  }

  /** Writes now; waits while the socket is congested. False once the client is gone. */
  async write(data: string | Uint8Array): Promise<boolean> {
    if (this.abort.aborted || this.ctx.res.destroyed) return false;
    const res = this.ctx.res;
    this.tap?.(data);
    if (!res.write(data)) {
      // Both listeners go as soon as either fires: a long stream to a slow client congests many times, and a
      // listener left behind per wait would pile up on the response until it closes.
      await new Promise<void>((resolve) => {
        const done = () => {
          res.off('drain', done);
          res.off('close', done);
          resolve();
        };
        res.on('drain', done);
        res.on('close', done);
      });
    }
    return !this.abort.aborted && !res.destroyed;
  }

  get ended(): boolean {
    return this.ctx.res.writableEnded;
  }

  end(): void {
    if (!this.ctx.res.writableEnded) this.ctx.res.end();
  }
}
