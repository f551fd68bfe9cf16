import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { abortFollowing, CLIENT_CLOSED, ClientClosed, clientAbort, RequestAbort } from '../../../src/net/abort';

/** How a request is aborted: once, with a reason saying who; its listeners told once; a client leaving noticed. */

test('aborted once with a ClientClosed by default; later aborts change nothing', () => {
  const a = new RequestAbort();
  expect(a.aborted).toBe(false);
  expect(a.reason).toBeNull();
  a.abort();
  expect(a.aborted).toBe(true);
  expect(a.reason).toBeInstanceOf(ClientClosed);
  expect((a.reason as ClientClosed).status).toBe(CLIENT_CLOSED);
  const first = a.reason;
  a.abort(new Error('other'));
  expect(a.reason).toBe(first);
  expect(a.signal.aborted).toBe(true);
  expect(a.signal.reason).toBe(first);
});

test('onAbort: each listener once, in order; unsubscribed ones not at all; late ones at once', () => {
  const a = new RequestAbort();
  const calls: string[] = [];
  a.onAbort(() => calls.push('a'));
  const off = a.onAbort(() => calls.push('b'));
  a.onAbort(() => calls.push('c'));
  off();
  off(); // twice is harmless
  a.abort();
  a.abort();
  expect(calls).toEqual(['a', 'c']);
  const late = a.onAbort(() => calls.push('late'));
  expect(calls).toEqual(['a', 'c', 'late']);
  late();
});

test('following a signal: aborted with its reason (an Error), at once if it already was; unfollow stops it', () => {
  const job = new AbortController();
  const a = abortFollowing(job.signal);
  const cancelled = new Error('batch cancelled');
  job.abort(cancelled);
  expect(a.reason).toBe(cancelled);

  const done = new AbortController();
  done.abort('not an error');
  const b = abortFollowing(done.signal);
  expect(b.reason).toEqual(new Error('aborted'));

  const shared = new AbortController();
  const c = abortFollowing(shared.signal);
  c.unfollow();
  shared.abort(new Error('x'));
  expect(c.aborted).toBe(false);
});

test('a client that leaves before its response is complete aborts it; one that got it all does not', async () => {
  const aborts: RequestAbort[] = [];
  let arrived: () => void = () => undefined;
  const gotRequest = () => new Promise<void>((r) => (arrived = r));
  const server = http.createServer((req, res) => {
    const a = clientAbort(res);
    aborts.push(a);
    if (req.url === '/whole') res.end('ok');
    else res.write('part'); // never ended: the client leaves
    arrived();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    const res = await fetch(`${url}/whole`);
    expect(await res.text()).toBe('ok');
    const ac = new AbortController();
    const waiting = gotRequest();
    const cut = fetch(`${url}/part`, { signal: ac.signal }).then((r) => r.text());
    await waiting;
    ac.abort();
    await cut.catch(() => undefined);
    await new Promise<void>((r) => aborts[1].onAbort(r));
    expect(aborts[1].reason).toBeInstanceOf(ClientClosed);
    expect(aborts[0].aborted).toBe(false);
  } finally {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  }
});
