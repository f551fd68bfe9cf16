import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ApiError } from '../../src/errors';
import { MAX_IMAGE_BYTES, resolveImage, type ResolveImageOptions } from '../../src/jobs/video/fetchImage';

/**
 * URL inputs against a real HTTP server on loopback: loopback is refused unless allowlisted, redirects are
 * re-vetted at every hop, the size limit stops the download, and the connection goes to the vetted address.
 */
const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==',
  'base64',
);
const JPEG = Buffer.concat([
  Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10]),
  Buffer.from('JFIF\0'),
  Buffer.alloc(64, 7),
]);
const WEBP = Buffer.concat([
  Buffer.from('RIFF'),
  Buffer.from([0x24, 0, 0, 0]),
  Buffer.from('WEBPVP8 '),
  Buffer.alloc(64, 1),
]);

let server: http.Server;
let other: http.Server; // a second loopback port, for "allowed host redirects to a disallowed one"
let base: string;
let port: number;
let otherPort: number;
const hits: string[] = [];
/** Bytes the /huge route managed to hand to the socket before the client gave up. */
let hugeSent = 0;
let hugeDone: Promise<void> = Promise.resolve();

function handler(req: http.IncomingMessage, res: http.ServerResponse): void {
  const u = new URL(req.url!, 'http://x');
  hits.push(u.pathname);
  const send = (type: string, body: Buffer) => {
    res.writeHead(200, { 'content-type': type, 'content-length': body.length });
    res.end(body);
  };
  switch (u.pathname) {
    case '/img.png':
      return send('image/png', PNG);
    case '/img.jpg':
      return send('image/jpeg', JPEG);
    case '/img.webp':
      return send('image/webp', WEBP);
    case '/octet.png':
      return send('application/octet-stream', PNG);
    case '/mislabeled':
      return send('image/jpeg', PNG);
    case '/garbage':
      return send('image/png', Buffer.from('<html>this is not an image</html>'));
    case '/gif':
      return send('image/gif', Buffer.concat([Buffer.from('GIF89a'), Buffer.alloc(20)]));
    case '/exactly-limit': {
      const body = Buffer.concat([PNG, Buffer.alloc(MAX_IMAGE_BYTES - PNG.length)]);
      return send('image/png', body);
    }
    case '/declared-too-big': {
      // Claims 11 MB: refused from the header, before reading the body.
      res.writeHead(200, { 'content-type': 'image/png', 'content-length': String(11 * 1024 * 1024) });
      res.write(PNG);
      return;
    }
    case '/huge': {
      // 64 MB chunked, no Content-Length: the client must stop reading past 10 MB.
      res.writeHead(200, { 'content-type': 'image/png' });
      const chunk = Buffer.alloc(64 * 1024, 0);
      PNG.copy(chunk);
      let remaining = 1024;
      hugeDone = new Promise((resolve) => {
        const pump = () => {
          while (remaining > 0) {
            remaining--;
            hugeSent += chunk.length;
            if (!res.write(chunk)) return void res.once('drain', pump);
          }
          res.end();
        };
        res.on('close', () => resolve());
        pump();
      });
      return;
    }
    case '/redirect': {
      // /redirect?to=<url>[&n=<hops>]: n hops through this server, then to `to`.
      const to = u.searchParams.get('to')!;
      const n = Number(u.searchParams.get('n') ?? '1');
      const next = n > 1 ? `/redirect?to=${encodeURIComponent(to)}&n=${n - 1}` : to;
      res.writeHead(n % 2 ? 302 : 307, { location: next });
      return void res.end();
    }
    case '/no-location':
      res.writeHead(302);
      return void res.end();
    case '/hang':
      return; // never answers
    default:
      res.writeHead(404);
      return void res.end('not found');
  }
}

beforeAll(async () => {
  server = http.createServer(handler);
  other = http.createServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  await new Promise<void>((r) => other.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
  otherPort = (other.address() as AddressInfo).port;
  base = `http://127.0.0.1:${port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  other.closeAllConnections();
  await new Promise((r) => server.close(r));
  await new Promise((r) => other.close(r));
});

const allowed = (extra: Partial<ResolveImageOptions> = {}): ResolveImageOptions => ({
  allowHosts: [`127.0.0.1:${port}`],
  ...extra,
});

async function rejection(p: Promise<unknown>): Promise<ApiError> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(ApiError);
    return e as ApiError;
  }
  throw new Error('expected a rejection');
}

test('loopback is refused without the allowlist, before any request reaches it', async () => {
  hits.length = 0;
  const e = await rejection(resolveImage(`${base}/img.png`, 'input_reference', { allowHosts: [] }));
  expect(e).toMatchObject({ status: 400, param: 'input_reference', code: 'image_url_forbidden' });
  // An allowlist entry for another port does not cover this one.
  const e2 = await rejection(
    resolveImage(`${base}/img.png`, 'input_reference', { allowHosts: [`127.0.0.1:${otherPort}`] }),
  );
  expect(e2.code).toBe('image_url_forbidden');
  // Nor does one for a different name of the same machine.
  const e3 = await rejection(resolveImage(`http://localhost:${port}/img.png`, 'input_reference', allowed()));
  expect(e3.code).toBe('image_url_forbidden');
  expect(hits).toEqual([]);
});

test('PNG, JPEG and WebP are fetched from an allowlisted host (host:port or bare host)', async () => {
  expect(await resolveImage(`${base}/img.png`, 'p', allowed())).toEqual({ bytes: PNG, mimeType: 'image/png' });
  expect(await resolveImage(`${base}/img.jpg`, 'p', allowed())).toEqual({ bytes: JPEG, mimeType: 'image/jpeg' });
  expect(await resolveImage(`${base}/img.webp`, 'p', { allowHosts: ['127.0.0.1'] })).toEqual({
    bytes: WEBP,
    mimeType: 'image/webp',
  });
  // A generic content type says nothing; the bytes decide.
  expect((await resolveImage(`${base}/octet.png`, 'p', allowed())).mimeType).toBe('image/png');
});

test('garbage, GIF, and an image type contradicting the bytes are refused', async () => {
  expect(await rejection(resolveImage(`${base}/garbage`, 'reference_images[1]', allowed()))).toMatchObject({
    status: 400,
    param: 'reference_images[1]',
    code: 'invalid_image_format',
  });
  expect((await rejection(resolveImage(`${base}/gif`, 'p', allowed()))).code).toBe('invalid_image_format');
  expect((await rejection(resolveImage(`${base}/mislabeled`, 'p', allowed()))).code).toBe('image_type_mismatch');
});

test('HTTP errors, missing Location and timeouts are 400s naming the parameter', async () => {
  expect(await rejection(resolveImage(`${base}/missing`, 'last_frame', allowed()))).toMatchObject({
    status: 400,
    param: 'last_frame',
    code: 'image_fetch_failed',
  });
  expect((await rejection(resolveImage(`${base}/no-location`, 'p', allowed()))).code).toBe('image_fetch_failed');
  const e = await rejection(resolveImage(`${base}/hang`, 'p', allowed({ timeoutMs: 300 })));
  expect(e).toMatchObject({ code: 'image_fetch_failed' });
  expect(e.message).toMatch(/timed out/);
});

test('10 MB limit: exactly 10 MB passes, a larger declared length is refused, a larger stream is cut off', async () => {
  expect((await resolveImage(`${base}/exactly-limit`, 'p', allowed())).bytes.length).toBe(MAX_IMAGE_BYTES);
  expect((await rejection(resolveImage(`${base}/declared-too-big`, 'p', allowed()))).code).toBe('image_too_large');

  hugeSent = 0;
  const e = await rejection(resolveImage(`${base}/huge`, 'input_reference', allowed()));
  expect(e).toMatchObject({ status: 400, param: 'input_reference', code: 'image_too_large' });
  await hugeDone;
  // The client hung up soon after the limit: far from all 64 MB left the server (socket buffers allow a few MB).
  expect(hugeSent).toBeLessThan(32 * 1024 * 1024);
});

test('redirects are followed (at most 3), each hop re-checked', async () => {
  expect((await resolveImage(`${base}/redirect?to=/img.webp&n=3`, 'p', allowed())).mimeType).toBe('image/webp');
  expect((await rejection(resolveImage(`${base}/redirect?to=/img.webp&n=4`, 'p', allowed()))).message).toMatch(
    /too many redirects/,
  );
  // Allowed host -> another allowlisted host:port is fine.
  const both = allowed({ allowHosts: [`127.0.0.1:${port}`, `127.0.0.1:${otherPort}`] });
  expect(
    (
      await resolveImage(
        `${base}/redirect?to=${encodeURIComponent(`http://127.0.0.1:${otherPort}/img.jpg`)}`,
        'p',
        both,
      )
    ).mimeType,
  ).toBe('image/jpeg');
});

test.each([
  ['another loopback port', () => `http://127.0.0.1:${otherPort}/img.png`],
  ['localhost', () => `http://localhost:${port}/img.png`],
  ['IPv6 loopback', () => `http://[::1]:${port}/img.png`],
  ['IPv4-mapped loopback', () => `http://[::ffff:127.0.0.1]:${port}/img.png`],
  ['cloud metadata', () => 'http://169.254.169.254/latest/meta-data/'],
  ['a private address', () => 'http://10.0.0.1/img.png'],
])('a redirect from an allowed host to %s is refused', async (_name, target) => {
  hits.length = 0;
  const e = await rejection(
    resolveImage(`${base}/redirect?to=${encodeURIComponent(target())}`, 'input_reference', allowed()),
  );
  expect(e).toMatchObject({ status: 400, param: 'input_reference', code: 'image_url_forbidden' });
  expect(hits).toEqual(['/redirect']); // the disallowed target was never contacted
});

test('a redirect to a non-http scheme is refused', async () => {
  const e = await rejection(
    resolveImage(`${base}/redirect?to=${encodeURIComponent('file:///etc/passwd')}`, 'p', allowed()),
  );
  expect(e).toMatchObject({ status: 400, code: 'invalid_image_url' });
});

test('the connection goes to the vetted address: no second DNS lookup can redirect it', async () => {
  // The name exists only in our injected resolver; if anything re-resolved it through the system, it would fail.
  let lookups = 0;
  const lookup = async () => {
    lookups++;
    return [{ address: '127.0.0.1', family: 4 }];
  };
  const opts = { allowHosts: [`pinned.invalid:${port}`], lookup };
  expect((await resolveImage(`http://pinned.invalid:${port}/img.png`, 'p', opts)).mimeType).toBe('image/png');
  expect(lookups).toBe(1);
  // The same name, not on the allowlist, is vetted against its (private) answer and refused.
  const e = await rejection(resolveImage(`http://pinned.invalid:${port}/img.png`, 'p', { allowHosts: [], lookup }));
  expect(e.code).toBe('image_url_forbidden');
});

test('DNS rebinding: vetted as public, re-resolving to loopback would reach our server; pinning stops it', async () => {
  // Vetting sees a public address for "localhost" (our injected answer); the system resolver would say 127.0.0.1,
  // where the test server listens. A client that resolved again when connecting would fetch the image; a pinned
  // one connects to the public address (nothing serves this port there, or no route) and fails.
  hits.length = 0;
  let n = 0;
  const lookup = async () => {
    n++;
    return [{ address: '198.41.0.4', family: 4 }];
  };
  const e = await rejection(
    resolveImage(`http://localhost:${port}/img.png`, 'p', { allowHosts: [], lookup, timeoutMs: 1500 }),
  );
  expect(e.code).toBe('image_fetch_failed');
  expect(n).toBe(1);
  expect(hits).toEqual([]);
});
