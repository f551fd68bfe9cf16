import http from 'node:http';
import type { AddressInfo } from 'node:net';
import client from 'prom-client';
import { registerRoutingMetrics, type RoutingSource } from './routingMetrics';

export interface MetricsServer {
  url: string;
  close(): Promise<void>;
}

/**
 * The worker's Prometheus endpoint (`GET /metrics` on WORKER_METRICS_PORT): Node process metrics and the routing
 * metrics of its video submissions. A bare node:http server: the worker has no HTTP stack of its own, and one
 * route needs none. Rejects if the port cannot be bound (a second worker on the host needs another port).
 */
export async function serveWorkerMetrics(source: RoutingSource, port: number, host: string): Promise<MetricsServer> {
  const registry = new client.Registry();
  client.collectDefaultMetrics({ register: registry });
  registerRoutingMetrics(registry, source);
  const server = http.createServer((req, res) => {
    if (req.method !== 'GET' || (req.url ?? '').split('?')[0] !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: GET /metrics\n');
      return;
    }
    registry.metrics().then(
      (text) => {
        res.writeHead(200, { 'content-type': registry.contentType }).end(text);
      },
      (e: unknown) => {
        res.writeHead(500, { 'content-type': 'text/plain' }).end(`metrics failed: ${(e as Error).message}\n`);
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (e: NodeJS.ErrnoException) =>
      reject(
        new Error(
          `worker metrics cannot listen on ${host}:${port} (${e.code ?? e.message}): ` +
            'set WORKER_METRICS_PORT to a free port, or off',
        ),
      ),
    );
    server.listen(port, host, resolve);
  });
  const addr = server.address() as AddressInfo;
  return {
    url: `http://${shownHost(addr)}:${addr.port}/metrics`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** Where a local client reaches the server (a wildcard address is reached on loopback). */
function shownHost(a: AddressInfo): string {
  if (a.address === '0.0.0.0' || a.address === '::') return '127.0.0.1';
  return a.family === 'IPv6' ? `[${a.address}]` : a.address;
}
