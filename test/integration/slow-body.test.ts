import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { startApi } from '../../src/server';
import { loadConfig } from '../../src/config';
import { createAccount } from '../../src/billing/ledger';
import { createApiKey } from '../../src/auth/apiKeys';

/**
 * Slow clients: a request whose body stops arriving (Transfer-Encoding: chunked, one chunk, then nothing) gets a
 * 408 in the interface's error shape once BODY_TIMEOUT_MS has passed, and its connection is closed; 500 of them
 * at once neither keep their sockets nor slow the answers to other clients. The API process as deployed
 * (src/server.ts startApi), with a short BODY_TIMEOUT_MS.
 */

const BODY_TIMEOUT_MS = 1500;
let api: Awaited<ReturnType<typeof startApi>>;
let port = 0;
let key = '';
beforeAll(async () => {
  api = await startApi(
    loadConfig({
      host: '127.0.0.1',
      port: 0,
      bodyTimeoutMs: BODY_TIMEOUT_MS,
      temporalAddress: 'off',
      logLevel: 'silent',
    }),
  );
  port = (api.server.address() as AddressInfo).port;
  key = (await createApiKey(api.deps.db, await createAccount(api.deps.db, 'slow-body'), 'k')).key;
});
afterAll(async () => {
  await api?.close();
});

interface Stalled {
  opened: number;
  closed: Promise<{ at: number; text: string }>;
}

/** Sends a request head and one chunk of its body, then nothing; resolves when the server closes the socket. */
function stalled(path: string, headers: Record<string, string>, firstChunk = '{"model":'): Stalled {
  const socket = net.connect(port, '127.0.0.1');
  const head = Object.entries({ host: 'gateway', 'transfer-encoding': 'chunked', ...headers })
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  socket.write(
    `POST ${path} HTTP/1.1\r\n${head}\r\n${Buffer.byteLength(firstChunk).toString(16)}\r\n${firstChunk}\r\n`,
  );
  let text = '';
  socket.setEncoding('utf8');
  socket.on('data', (d) => (text += d));
  const closed = new Promise<{ at: number; text: string }>((resolve) =>
    socket.on('close', () => resolve({ at: Date.now(), text })),
  );
  socket.on('error', () => undefined);
  return { opened: Date.now(), closed };
}

const json = { authorization: '', 'content-type': 'application/json' };
const bodyOf = (text: string) => JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4));

test('a body that stops arriving: 408 in the OpenAI or Anthropic shape, then the connection is closed', async () => {
  const chat = stalled('/v1/chat/completions', { ...json, authorization: `Bearer ${key}` });
  const messages = stalled('/v1/messages', { ...json, 'x-api-key': key, 'anthropic-version': '2023-06-01' });
  const form = stalled(
    '/v1/audio/transcriptions',
    { authorization: `Bearer ${key}`, 'content-type': 'multipart/form-data; boundary=xyz' },
    '--xyz\r\nContent-Disposition: form-data; name="model"\r\n\r\nwhisper-1\r\n',
  );
  for (const [s, shape] of [
    [chat, 'openai'],
    [messages, 'anthropic'],
    [form, 'openai'],
  ] as const) {
    const { at, text } = await s.closed;
    expect(at - s.opened).toBeGreaterThanOrEqual(BODY_TIMEOUT_MS - 50);
    expect(at - s.opened).toBeLessThan(BODY_TIMEOUT_MS + 4000); // before Node's own requestTimeout (+5 s)
    expect(text).toMatch(/^HTTP\/1\.1 408 /);
    expect(text.toLowerCase()).toContain('connection: close');
    if (shape === 'openai')
      expect(bodyOf(text).error).toMatchObject({ type: 'invalid_request_error', code: 'request_timeout' });
    else expect(bodyOf(text)).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } });
  }
});

test('a slow body refused before it is read (bad key) is answered at once, and its socket closed on time', async () => {
  const s = stalled('/v1/chat/completions', { ...json, authorization: 'Bearer sk-gw-not-a-key' });
  const { at, text } = await s.closed;
  expect(text).toMatch(/^HTTP\/1\.1 401 /);
  expect(at - s.opened).toBeGreaterThanOrEqual(BODY_TIMEOUT_MS - 50);
  expect(at - s.opened).toBeLessThan(BODY_TIMEOUT_MS + 4000);
});

/** Latencies of `n` sequential GET /v1/models, in ms. */
async function latencies(n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    const r = await fetch(`http://127.0.0.1:${port}/v1/models`, { headers: { authorization: `Bearer ${key}` } });
    expect(r.status).toBe(200);
    await r.arrayBuffer();
    out.push(performance.now() - t);
  }
  return out;
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

test('500 stalled bodies at once: others are answered as fast as before, and all 500 are closed on time', async () => {
  await latencies(10); // warm
  const before = median(await latencies(30));
  const slow = Array.from({ length: 500 }, () =>
    stalled('/v1/chat/completions', { ...json, authorization: `Bearer ${key}` }),
  );
  await new Promise((r) => setTimeout(r, 300)); // every head is in and every body read has begun
  const during = await latencies(30);
  // Measured while the 500 were held (well before their timeout), against the baseline of this same run.
  expect(Math.max(...during.slice(0, 10))).toBeLessThan(BODY_TIMEOUT_MS);
  expect(median(during)).toBeLessThan(Math.max(10 * before, before + 100));
  const ends = await Promise.all(slow.map(async (s) => ({ ...(await s.closed), opened: s.opened })));
  const lasted = ends.map((e) => e.at - e.opened);
  expect(Math.min(...lasted)).toBeGreaterThanOrEqual(BODY_TIMEOUT_MS - 50);
  expect(Math.max(...lasted)).toBeLessThan(BODY_TIMEOUT_MS + 10_000);
  expect(ends.filter((e) => /^HTTP\/1\.1 408 /.test(e.text))).toHaveLength(500);
}, 60_000);
