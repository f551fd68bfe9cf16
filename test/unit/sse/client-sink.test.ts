import type { ServerResponse } from 'node:http';
import { SseSink, type SseSinkContext } from '../../../src/sse/clientSink';
import { RequestAbort } from '../../../src/net/abort';
import { localServer, type LocalServer } from '../../support/localServer';

/** The sink of translated streams, writing to a real HTTP response read by fetch. */

let srv: LocalServer;
beforeAll(async () => {
  srv = await localServer();
});
afterAll(() => srv.close());

/** Runs `write` against a sink on the next request's response; returns the client's view and the context. */
async function served(write: (sink: SseSink, ctx: SseSinkContext, abort: RequestAbort) => Promise<void>) {
  let ctx: SseSinkContext | null = null;
  const done = new Promise<void>((resolve, reject) => {
    srv.handle((_req, res: ServerResponse) => {
      const abort = new RequestAbort();
      ctx = { res, status: 404, state: { requestId: 'req_abc' } };
      write(new SseSink(ctx, abort), ctx, abort).then(resolve, reject);
    });
  });
  const res = await fetch(srv.url);
  const body = await res.text();
  await done;
  return { status: res.status, headers: res.headers, body, ctx: ctx! };
}

test('open sends 200, the SSE headers, the extras and the request id once; writes go out in order', async () => {
  const r = await served(async (sink) => {
    expect(sink.isOpen).toBe(false);
    sink.open({ 'x-extra': '1' });
    sink.open({ 'x-extra': '2' }); // already open: nothing happens
    expect(sink.isOpen).toBe(true);
    expect(await sink.write('event: a\ndata: {}\n\n')).toBe(true);
    expect(await sink.write(Buffer.from('data: 2\n\n'))).toBe(true);
    expect(sink.ended).toBe(false);
    sink.end();
    sink.end(); // ending twice is harmless
    expect(sink.ended).toBe(true);
  });
  expect(r.status).toBe(200);
  expect(r.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
  expect(r.headers.get('cache-control')).toBe('no-cache');
  expect(r.headers.get('x-accel-buffering')).toBe('no');
  expect(r.headers.get('x-extra')).toBe('1');
  expect(r.headers.get('x-request-id')).toBe('req_abc');
  expect(r.headers.get('request-id')).toBe('req_abc');
  expect(r.body).toBe('event: a\ndata: {}\n\ndata: 2\n\n');
  expect(r.ctx.status).toBe(200); // for the request log: Koa did not send it
  expect(r.ctx.respond).toBe(false);
});

test('once the client is gone a write sends nothing and says so', async () => {
  const r = await served(async (sink, _ctx, abort) => {
    sink.open();
    expect(await sink.write('data: 1\n\n')).toBe(true);
    abort.abort();
    expect(sink.clientGone).toBe(true);
    expect(await sink.write('data: 2\n\n')).toBe(false);
    sink.end();
  });
  expect(r.body).toBe('data: 1\n\n');
});

test('a write to a congested socket waits for the drain, and leaves no listener behind', async () => {
  const big = 'x'.repeat(1 << 20);
  let listeners = -1;
  const r = await served(async (sink, ctx) => {
    sink.open();
    for (let i = 0; i < 3; i++) expect(await sink.write(`data: ${big}\n\n`)).toBe(true);
    listeners = ctx.res.listenerCount('drain');
    sink.end();
  });
  expect(r.body.length).toBe(3 * (big.length + 8));
  expect(listeners).toBe(0);
});
