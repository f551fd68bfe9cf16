import type { Ctx } from './requestState';

/**
 * Answers with an upstream JSON body as received (no re-serialisation), written here rather than by Koa's respond:
 * the same status and headers Koa would send, without its type lookup, body setter and length bookkeeping.
 */
export function sendJsonBuffer(ctx: Ctx, body: Buffer): void {
  ctx.status = 200; // for the request log and metrics
  ctx.respond = false;
  const res = ctx.res;
  res.setHeader('content-type', 'application/json; charset=utf-8');
  res.setHeader('content-length', body.length);
  res.end(body);
}
