import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import {
  bareHost,
  NonPublicHost,
  pinnedAgent,
  UnresolvableHost,
  vetHost,
  type Lookup,
} from '../../../src/net/vettedHost';

/**
 * The SSRF guard of user-supplied URLs: every address of the host must be public (unless private ones are allowed),
 * and the connection goes only to the vetted addresses. DNS is a lookup table here; the pinned connection reaches a
 * local server under a name no DNS knows.
 */

const table =
  (answers: Record<string, string[]>): Lookup =>
  async (host) => {
    const a = answers[host];
    if (!a) throw Object.assign(new Error(`ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    return a.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
const signal = () => new AbortController().signal;

test('a host whose addresses are all public is vetted, with every address', async () => {
  const lookup = table({ 'cdn.example.com': ['93.184.216.34', '2606:2800:220:1:248:1893:25c8:1946'] });
  expect(
    await vetHost(new URL('https://CDN.example.com/a.png'), { allowPrivate: false, lookup, signal: signal() }),
  ).toEqual([
    { address: '93.184.216.34', family: 4 },
    { address: '2606:2800:220:1:248:1893:25c8:1946', family: 6 },
  ]);
});

test('one private address among public ones refuses the host, naming the class', async () => {
  const lookup = table({ 'rebind.example.com': ['93.184.216.34', '169.254.169.254'] });
  const e = await vetHost(new URL('http://rebind.example.com/'), {
    allowPrivate: false,
    lookup,
    signal: signal(),
  }).catch((x) => x);
  expect(e).toBeInstanceOf(NonPublicHost);
  expect(e).toMatchObject({ host: 'rebind.example.com', addressClass: 'link-local' });
  expect(e.message).toBe('the host rebind.example.com is not a public address (link-local)');
  // Allowed private (a webhook to an internal endpoint an operator enabled): both addresses.
  expect(
    await vetHost(new URL('http://rebind.example.com/'), { allowPrivate: true, lookup, signal: signal() }),
  ).toHaveLength(2);
});

test('literal addresses are judged without DNS, IPv6 in brackets too', async () => {
  const lookup: Lookup = async () => {
    throw new Error('no DNS for literals');
  };
  for (const [url, cls] of [
    ['http://127.0.0.1:8080/', 'loopback'],
    ['http://[::1]/', 'loopback'],
    ['http://[::ffff:10.0.0.1]/', 'private'],
    ['http://0.0.0.0/', 'unspecified'],
  ] as const)
    await expect(vetHost(new URL(url), { allowPrivate: false, lookup, signal: signal() })).rejects.toMatchObject({
      addressClass: cls,
    });
  expect(
    await vetHost(new URL('http://[2606:4700::1111]/'), { allowPrivate: false, lookup, signal: signal() }),
  ).toEqual([{ address: '2606:4700::1111', family: 6 }]);
  expect(bareHost('[2606:4700::1111]')).toBe('2606:4700::1111');
  expect(bareHost('Example.COM')).toBe('example.com');
});

test('a host that does not resolve, resolves to nothing, or takes too long is unresolvable', async () => {
  const none = await vetHost(new URL('http://nope.invalid/'), {
    allowPrivate: false,
    lookup: table({}),
    signal: signal(),
  }).catch((e) => e);
  expect(none).toBeInstanceOf(UnresolvableHost);
  expect(none).toMatchObject({
    host: 'nope.invalid',
    timedOut: false,
    message: 'could not resolve the host nope.invalid',
  });
  await expect(
    vetHost(new URL('http://empty.example/'), {
      allowPrivate: false,
      lookup: table({ 'empty.example': [] }),
      signal: signal(),
    }),
  ).rejects.toMatchObject({ timedOut: false });
  const slow: Lookup = () => new Promise(() => undefined); // getaddrinfo that never answers
  const ac = new AbortController();
  const pending = vetHost(new URL('http://slow.example/'), { allowPrivate: false, lookup: slow, signal: ac.signal });
  ac.abort(new Error('time is up'));
  await expect(pending).rejects.toMatchObject({ timedOut: true, message: 'resolving the host slow.example timed out' });
});

test('a pinned agent connects to the vetted address, whatever the name would resolve to', async () => {
  const server = http.createServer((req, res) => res.end(`host ${req.headers.host}`));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  const agent = pinnedAgent([{ address: '127.0.0.1', family: 4 }], 5000);
  try {
    const r = await request(`http://images.nowhere.invalid:${port}/x.png`, { dispatcher: agent });
    expect(r.statusCode).toBe(200);
    expect(await r.body.text()).toBe(`host images.nowhere.invalid:${port}`);
  } finally {
    await agent.close();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  }
});
