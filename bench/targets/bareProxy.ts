import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';
import { Pool } from 'undici';
import { serveTarget } from './ipc';

/**
 * The floor Node gives here: a bare Koa + undici pass-through proxy with no auth, validation, routing or
 * billing. It reads the raw body, sends it upstream on a keep-alive undici Pool (same pool settings as the
 * gateway's OpenAI adapter) and pipes the answer back, so SSE chunks are forwarded as they arrive. A client that
 * goes away aborts the upstream request: Koa destroys the piped body when the response closes.
 * /v1/<rest> -> <UPSTREAM_URL>/<rest>.
 */
serveTarget(async () => {
  const upstream = new URL(process.env.UPSTREAM_URL ?? '');
  const basePath = upstream.pathname.replace(/\/+$/, '');
  const pool = new Pool(upstream.origin, {
    // The gateway's setting (UPSTREAM_CONNECTIONS, default 256), so both proxies open as many sockets upstream.
    connections: Number(process.env.UPSTREAM_CONNECTIONS) || 256,
    pipelining: 1,
    keepAliveTimeout: 30_000,
    keepAliveMaxTimeout: 600_000,
  });
  const app = new Koa();
  app.silent = true;
  app.use(async (ctx) => {
    const chunks: Buffer[] = [];
    for await (const c of ctx.req) chunks.push(c as Buffer);
    const up = await pool.request({
      method: 'POST',
      path: basePath + ctx.path.replace(/^\/v1/, ''),
      headers: {
        'content-type': ctx.get('content-type') || 'application/json',
        authorization: ctx.get('authorization') || 'Bearer bench',
      },
      body: Buffer.concat(chunks),
    });
    ctx.status = up.statusCode;
    const ct = up.headers['content-type'];
    if (ct) ctx.set('content-type', String(ct));
    // Destroying the body when the client left emits an abort error; nothing to do about it but not crash.
    up.body.on('error', () => undefined);
    ctx.body = up.body;
    // Forward the length when the upstream gave one (as any reverse proxy does), so the body is not re-chunked.
    const len = up.headers['content-length'];
    if (len) ctx.length = Number(len);
  });
  const server = http.createServer(app.callback());
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', res));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async close() {
      await new Promise<void>((res) => {
        server.close(() => res());
        server.closeAllConnections();
      });
      await pool.close();
    },
  };
});
