import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';
import Router from '@koa/router';
import { dispatchByPrefix } from '../../../src/api/dispatch';
import type { GatewayState } from '../../../src/api/middleware';

// The exact-route fast path must answer like @koa/router itself: same handler, params, router-level middleware,
// trailing-slash variants, 405 for a known path with another method.
let server: http.Server;
let base = '';
beforeAll(async () => {
  const a = new Router<GatewayState>();
  a.post('/v1/a', (ctx) => {
    ctx.body = { route: 'a', params: ctx.params };
  });
  a.get('/v1/a/:id', (ctx) => {
    ctx.body = { route: 'a/:id', id: ctx.params.id };
  });
  const b = new Router<GatewayState>();
  b.use(async (ctx, next) => {
    ctx.set('x-router-b', 'yes');
    await next();
  });
  b.post('/v1/b', (ctx) => {
    ctx.body = { route: 'b' };
  });
  const dup1 = new Router<GatewayState>();
  dup1.post('/v1/dup', async (ctx, next) => {
    ctx.set('x-first', '1');
    await next();
  });
  const dup2 = new Router<GatewayState>();
  dup2.post('/v1/dup', (ctx) => {
    ctx.body = { route: 'dup2' };
  });
  const app = new Koa<GatewayState>();
  app.use(dispatchByPrefix([a, b, dup1, dup2]));
  server = http.createServer(app.callback());
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

async function call(method: string, path: string) {
  const res = await fetch(base + path, { method });
  return { status: res.status, headers: res.headers, body: res.status === 200 ? await res.json() : await res.text() };
}

test('static routes, their variants, parameters and router middleware behave as with the routers alone', async () => {
  expect(await call('POST', '/v1/a')).toMatchObject({ status: 200, body: { route: 'a', params: {} } });
  // Paths are case-sensitive (the prefix map is), as OpenAI's are.
  expect((await call('POST', '/V1/A')).status).toBe(404);
  expect(await call('POST', '/v1/a/')).toMatchObject({ status: 200, body: { route: 'a' } });
  expect(await call('GET', '/v1/a/42')).toMatchObject({ status: 200, body: { route: 'a/:id', id: '42' } });
  expect((await call('GET', '/v1/a')).status).toBe(405);
  const b = await call('POST', '/v1/b');
  expect(b).toMatchObject({ status: 200, body: { route: 'b' } });
  expect(b.headers.get('x-router-b')).toBe('yes');
  // Declared by two routers: left to the routers, which run the first and fall through to the second.
  const d = await call('POST', '/v1/dup');
  expect(d).toMatchObject({ status: 200, body: { route: 'dup2' } });
  expect(d.headers.get('x-first')).toBe('1');
  expect((await call('POST', '/v1/none')).status).toBe(404);
});
