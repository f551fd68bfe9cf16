import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import { startGateway, type TestGateway } from '../support/gateway';
import { loadConfig } from '../../src/config';
import { getBalance } from '../../src/billing/ledger';
import { tokensCost } from '../../src/billing/pricing';
import { sleep } from '../support/http';
import { testTimeLeft } from '../support/eventually';

/**
 * At an upstream's `data: [DONE]` the gateway ends the client's response at once, then drains the upstream body so
 * its keep-alive connection goes back to the pool. The emulator sends [DONE] and the end of its chunked body in one
 * write, so a gateway that destroyed the body at [DONE] would still get its connection back; here a TCP proxy
 * between the gateway and the emulator holds back everything after [DONE] (the `0\r\n\r\n` terminator) until the
 * client's stream has ended (or, should it never end, until half the test's time is gone).
 * The gateway must then (1) still reuse one upstream connection for all 30 streams (destroying the body before its end
 * closes the socket: 30 connections), and (2) end every client stream before that terminator reaches it.
 */

const STREAMS = 30;
const DONE = Buffer.from('data: [DONE]\n\n');

interface SplitProxy {
  url: string;
  /** TCP connections the gateway opened to the upstream. */
  connections: number;
  /** Per upstream response: bytes held back after [DONE], and when they were let through (performance.now()). */
  held: { bytes: number; releasedAt: number }[];
  /** Lets the bytes held back after the last [DONE] through. */
  release(): void;
  setTarget(url: string): void;
  close(): Promise<void>;
}

async function startSplitProxy(): Promise<SplitProxy> {
  let target = { host: '127.0.0.1', port: 0 };
  const sockets = new Set<net.Socket>();
  const proxy: SplitProxy = {
    url: '',
    connections: 0,
    held: [],
    release: () => undefined,
    setTarget(url) {
      const u = new URL(url);
      target = { host: u.hostname, port: Number(u.port) };
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((res) => server.close(() => res()));
    },
  };
  const server = net.createServer((down) => {
    proxy.connections++;
    const up = net.connect(target.port, target.host);
    for (const s of [down, up]) {
      sockets.add(s);
      s.on('error', () => undefined);
      s.on('close', () => {
        sockets.delete(s);
        down.destroy();
        up.destroy();
      });
    }
    down.pipe(up);
    // The last bytes of the previous chunk, so a [DONE] split across two reads is still found.
    let carry: Buffer = Buffer.alloc(0);
    up.on('data', (buf: Buffer) => {
      const seen = carry.length ? Buffer.concat([carry, buf]) : buf;
      const at = seen.indexOf(DONE);
      if (at < 0) {
        carry = seen.subarray(Math.max(0, seen.length - DONE.length + 1));
        down.write(buf);
        return;
      }
      carry = Buffer.alloc(0);
      const cut = at + DONE.length - (seen.length - buf.length);
      down.write(buf.subarray(0, cut));
      const tail = buf.subarray(cut);
      up.pause(); // whatever else the upstream sends waits too
      // Held until the test has seen its client's stream end (a gateway that waited for the terminator would hold
      // the client forever: then the fallback lets it through, and the order of the two times shows the fault).
      let held = true;
      const letGo = () => {
        if (!held) return;
        held = false;
        clearTimeout(fallback);
        proxy.held.push({ bytes: tail.length, releasedAt: performance.now() });
        if (tail.length) down.write(tail);
        up.resume();
      };
      const fallback = setTimeout(letGo, testTimeLeft() / 2);
      proxy.release = letGo;
    });
  });
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', res));
  proxy.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return proxy;
}

let gw: TestGateway;
let proxy: SplitProxy;
let catalogFile = '';
beforeAll(async () => {
  proxy = await startSplitProxy();
  // The shipped catalog with the OpenAI-compatible provider pointed at the proxy (the emulator starts with the
  // gateway).
  const catalog = JSON.parse(fs.readFileSync(loadConfig().catalogPath, 'utf8'));
  catalog.providers['emulator-openai'].baseUrl = `${proxy.url}/openai/v1`;
  catalogFile = path.join(os.tmpdir(), `gw-drain-catalog-${process.pid}.json`);
  fs.writeFileSync(catalogFile, JSON.stringify(catalog));
  gw = await startGateway({ logLevel: 'silent', catalogPath: catalogFile }, { temporal: false });
  proxy.setTarget(gw.emulator.url);
});
afterAll(async () => {
  await gw.close();
  await proxy.close();
  fs.rmSync(catalogFile, { force: true });
});

// Each client stream ends before the upstream body does, one upstream connection serves them all, each stream is
// delivered whole and billed once.
test(`${STREAMS} sequential streams: each ends early, one upstream connection, whole, billed once`, async () => {
  const START = 1_000_000;
  const { key, accountId } = await gw.account(START);
  const client = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0 });
  const clientDoneAt: number[] = [];
  const streamed: { prompt: number; completion: number }[] = [];
  for (let i = 0; i < STREAMS; i++) {
    const prompt = `Stream ${i}: tell me about keep-alive connections.`;
    const stream = await client.chat.completions.create({
      model: 'gpt-4o-mini',
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: 'user', content: prompt }],
    });
    let text = '';
    let finish: string | null = null;
    let usage: { prompt_tokens: number; completion_tokens: number } | null = null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
      if (chunk.usage) usage = chunk.usage;
    }
    clientDoneAt.push(performance.now());
    proxy.release();
    expect(text).toBe(`You said: ${prompt}`); // the emulator's whole reply, every piece of it
    expect(finish).toBe('stop');
    expect(usage).not.toBeNull();
    streamed.push({ prompt: usage!.prompt_tokens, completion: usage!.completion_tokens });
    // Let the held terminator through and give undici a moment to return the connection to its pool, so the
    // next request can find it there.
    while (proxy.held.length <= i) await sleep(2);
    await sleep(10);
  }
  // The proxy really split every response (a body framed by Content-Length would leave nothing to hold back).
  expect(proxy.held).toHaveLength(STREAMS);
  for (const h of proxy.held) expect(h.bytes).toBeGreaterThan(0);
  // (1) Drained, not destroyed: the connection went back to the pool (a destroyed body costs a connection per stream;
  // on a loaded machine a request may now and then start before its predecessor's connection is back in the pool).
  expect(proxy.connections).toBeLessThanOrEqual(STREAMS / 5);
  // (2) The client had its whole stream while the upstream's body was still unfinished.
  for (let i = 0; i < STREAMS; i++) expect(clientDoneAt[i]).toBeLessThan(proxy.held[i].releasedAt);

  // Billing: one usage record per stream with the upstream's own usage (no estimate), priced from the catalog,
  // one ledger charge each, and the balance down by exactly their sum.
  await gw.deps.credit.flush();
  const rows = (
    await gw.deps.db.query(
      `SELECT u.status, u.cost_vnd::int AS cost, u.units,
            (SELECT count(*)::int FROM ledger_events e
             WHERE e.idempotency_key = u.charge_key AND e.kind = 'charged') AS charges
     FROM usage_records u WHERE u.account_id = $1`,
      [accountId],
    )
  ).rows as { status: number; cost: number; units: Record<string, number>; charges: number }[];
  expect(rows).toHaveLength(STREAMS);
  const pricing = gw.deps.catalog.get('gpt-4o-mini')!.pricing;
  for (const r of rows) {
    expect(r.status).toBe(200);
    expect(r.units.estimated).toBeUndefined();
    expect(r.cost).toBe(tokensCost(pricing, r.units.prompt_tokens, r.units.completion_tokens));
    expect(r.cost).toBeGreaterThan(0);
    expect(r.charges).toBe(1);
  }
  // Each names the charge that covers it (one per lease hold per flush), and the charges add up to the usage.
  const sums = (
    await gw.deps.db.query(
      `SELECT (SELECT sum(amount)::int FROM ledger_events WHERE account_id = $1 AND kind = 'charged') AS charged,
            (SELECT sum(cost_vnd)::int FROM usage_records WHERE account_id = $1) AS used`,
      [accountId],
    )
  ).rows[0];
  expect(sums.charged).toBe(sums.used);
  const key2 = (u: { prompt: number; completion: number }) => `${u.prompt}/${u.completion}`;
  expect(
    rows.map((r) => key2({ prompt: r.units.prompt_tokens, completion: r.units.completion_tokens })).sort(),
  ).toEqual(streamed.map(key2).sort());
  const balance = await getBalance(gw.deps.db, accountId);
  expect(balance?.balance).toBe(START - rows.reduce((s, r) => s + r.cost, 0));
});
