import type { ServerResponse } from 'node:http';

/**
 * The one way a request is aborted: a RequestAbort (an AbortController) per request, made on first need, aborted
 * with a reason that says who aborted; today the one reason is ClientClosed, the client going away before its
 * response is complete. Every upstream call of the request takes it, and an aborted call throws its reason, which
 * the API's error handler recognises to end the request quietly.
 */

/** Status recorded for a request whose client went away before its answer was complete (nginx's 499). */
export const CLIENT_CLOSED = 499;

/** The reason a request is aborted when its client went away; what an upstream call aborted by it throws. */
export class ClientClosed extends Error {
  readonly status = CLIENT_CLOSED;

  constructor() {
    super('the client closed the request');
    this.name = 'ClientClosed';
  }
}

/**
 * A request's AbortController. Its `signal` is made only when something asks for it (undici's request(), fetch):
 * a Node AbortSignal costs microseconds to make and to collect, paid by every request, while the gateway's own
 * upstream dispatcher listens through `onAbort`, a plain list. `aborted` and `reason` read without the signal.
 */
export class RequestAbort extends AbortController {
  private why: Error | null = null;
  private listeners: (() => void)[] | null = null;

  get aborted(): boolean {
    return this.why !== null;
  }

  /** Who aborted (a ClientClosed when the client left); null until aborted. */
  get reason(): Error | null {
    return this.why;
  }

  override abort(reason: Error = new ClientClosed()): void {
    if (this.why) return;
    this.why = reason;
    super.abort(reason);
    const listeners = this.listeners;
    this.listeners = null;
    if (listeners) for (const fn of listeners) fn();
  }

  /** Calls `fn` once when this aborts (at once if it has); returns the unsubscribe function. */
  onAbort(fn: () => void): () => void {
    if (this.why) {
      fn();
      return noop;
    }
    (this.listeners ??= []).push(fn);
    return () => {
      const l = this.listeners;
      const i = l ? l.indexOf(fn) : -1;
      if (i >= 0) l!.splice(i, 1);
    };
  }
}

const noop = () => undefined;

/** The request's RequestAbort: aborted with a ClientClosed when `res` closes before its response is complete. */
export function clientAbort(res: ServerResponse): RequestAbort {
  const a = new RequestAbort();
  res.once('close', () => {
    if (!res.writableFinished) a.abort(new ClientClosed());
  });
  return a;
}

/** A RequestAbort that follows `signal` (a job's cancellation, say): aborted with its reason when it aborts. */
export function abortFollowing(signal: AbortSignal): RequestAbort & { unfollow(): void } {
  const a = new RequestAbort() as RequestAbort & { unfollow(): void };
  const follow = () => a.abort(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
  if (signal.aborted) follow();
  else signal.addEventListener('abort', follow, { once: true });
  // A long-lived signal (an activity's, shared by thousands of batch lines) must not keep one listener per call.
  a.unfollow = () => signal.removeEventListener('abort', follow);
  return a;
}
