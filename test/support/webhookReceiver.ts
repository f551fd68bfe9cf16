import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { DAY_MS, type WebhookSettings } from '../../src/jobs/webhooks/settings';

/**
 * A webhook receiver over real HTTP for tests: records every request (headers, raw body) and answers each with
 * the next scripted behaviour (a status, a hang, a dropped connection, a redirect, an endless body), then 200.
 */

export type Reply =
  number | 'hang' | 'drop' | { redirect: string } | 'endless' | { status: number; retryAfter: string };

export interface Received {
  path: string;
  headers: Record<string, string>;
  body: string;
  at: number;
}

export interface Receiver {
  url: string;
  received: Received[];
  /** Replies for the next requests, in order (afterwards: 200). */
  script(...replies: Reply[]): void;
  /** Every later request answers this (until script() is called again). */
  always(reply: Reply): void;
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const received: Received[] = [];
  let queue: Reply[] = [];
  let fallback: Reply = 200;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) headers[k] = Array.isArray(v) ? v.join(', ') : String(v);
      received.push({ path: req.url ?? '', headers, body: Buffer.concat(chunks).toString('utf8'), at: Date.now() });
      const reply = queue.length ? queue.shift()! : fallback;
      if (reply === 'hang') return;
      if (reply === 'drop') return void req.socket.destroy();
      if (reply === 'endless') {
        res.writeHead(200, { 'content-type': 'text/plain' });
        const chunk = Buffer.alloc(16 * 1024, 'x');
        const timer = setInterval(() => res.write(chunk), 1);
        res.on('close', () => clearInterval(timer));
        return;
      }
      if (typeof reply === 'object' && 'redirect' in reply) {
        res.writeHead(302, { location: reply.redirect });
        return void res.end();
      }
      if (typeof reply === 'object') {
        res.writeHead(reply.status, { 'retry-after': reply.retryAfter });
        return void res.end('slow down');
      }
      res.writeHead(reply, { 'content-type': 'application/json' });
      res.end(reply >= 200 && reply < 300 ? '{"ok":true}' : `{"error":"status ${reply}"}`);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    received,
    script: (...replies) => {
      queue = replies;
    },
    always: (reply) => {
      queue = [];
      fallback = reply;
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** Webhook settings for tests: private receivers allowed, retries within a second, a two-minute window. */
export function fastWebhookSettings(): WebhookSettings {
  return {
    allowPrivateUrls: true,
    timeoutMs: 2_000,
    retry: { initialMs: 200, maxMs: 1_000, windowMs: 120_000 },
    maxEndpoints: 20,
    rotationGraceMs: DAY_MS,
  };
}

export interface BlackHole {
  url: string;
  /** Connections open now, and the most open at once so far. */
  open(): number;
  maxOpen(): number;
  /** Connections accepted so far. */
  accepted(): number;
  close(): Promise<void>;
}

/** A receiver that accepts each TCP connection and never answers (the sender's timeout ends each try). */
export async function startBlackHole(): Promise<BlackHole> {
  const sockets = new Set<net.Socket>();
  let max = 0;
  let accepted = 0;
  const server = net.createServer((s) => {
    accepted++;
    sockets.add(s);
    max = Math.max(max, sockets.size);
    s.on('error', () => undefined);
    s.on('close', () => sockets.delete(s));
    // Reads (and drops) what comes, so a sender closing its end is seen at once: a paused socket never reads the
    // end, and would count as open forever.
    s.resume();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    open: () => sockets.size,
    maxOpen: () => max,
    accepted: () => accepted,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}
