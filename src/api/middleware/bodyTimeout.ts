import type Koa from 'koa';
import { ApiError } from '../../errors';
import type { GatewayState } from '../requestState';

/**
 * Bounds the arrival of a request body: `ms` after the request reaches the app, a body still incomplete fails
 * whatever is reading it (raw-body, koa-body and formidable all give up on the request's 'aborted' event), and the
 * client gets a 408 in the interface's error shape with `Connection: close`, after which the socket is closed.
 * Without it, a client that sends one chunk and then nothing holds its connection and its reader for minutes.
 * A body nobody reads (a request refused before its body) has its socket closed at the same moment once the
 * answer is out. Node's own requestTimeout (src/server.ts) is the backstop for what never reaches the app.
 */
export function bodyTimeout(ms: number): Koa.Middleware<GatewayState> {
  return async (ctx, next) => {
    const req = ctx.req;
    if (req.complete || (req.headers['content-length'] === undefined && req.headers['transfer-encoding'] === undefined))
      return next();
    let timedOut = false;
    const timer = setTimeout(() => {
      if (req.complete || req.socket.destroyed) return;
      timedOut = true;
      if (ctx.res.writableEnded) req.socket.destroy();
      else req.emit('aborted');
    }, ms);
    // Cleared once the body has arrived (read by a handler, or drained by Node after an early answer).
    req.once('end', () => clearTimeout(timer));
    try {
      await next();
    } catch (e) {
      if (!timedOut) throw e;
      // Once the answer is written the connection closes (Connection: close); a client that keeps it open anyway
      // is cut when the response has gone out.
      ctx.res.once('finish', () => req.socket.destroy());
      throw new ApiError(
        408,
        `The request body did not arrive within ${ms / 1000} s.`,
        'invalid_request_error',
        null,
        'request_timeout',
        { connection: 'close' },
      );
    }
  };
}
