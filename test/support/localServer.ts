import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A plain HTTP server on 127.0.0.1 for unit tests of code that writes to a real ServerResponse (SSE relays and
 * sinks): each test sets the handler of the next requests; the test's client is fetch.
 */
export interface LocalServer {
  readonly url: string;
  handle(fn: http.RequestListener): void;
  close(): Promise<void>;
}

export async function localServer(): Promise<LocalServer> {
  let handler: http.RequestListener = (_req, res) => res.end();
  const server = http.createServer((req, res) => handler(req, res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    handle(fn) {
      handler = fn;
    },
    close() {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
