import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { SseRelay } from '../../src/sse/clientRelay';
import { StreamUsage, type BilledTokens } from '../../src/modelCall/meter';

/**
 * SseRelay over a real HTTP response: whatever the chunking of the upstream's bytes, the client gets the same
 * events (the usage-only chunk only when asked for), and the same tokens are billed. Content chunks are forwarded
 * without decoding, so the chunkings below cross every boundary: inside events, keys and markers.
 */

interface Case {
  chunks: Buffer[];
  clientWantsUsage: boolean;
}
interface Outcome {
  text: string;
  status: number;
  tokens: BilledTokens;
  maxListeners: number;
}

let server: http.Server;
let url = '';
let next: Case;
let outcome: Promise<{ status: number; tokens: BilledTokens; maxListeners: number }>;

beforeAll(async () => {
  server = http.createServer((req, res) => {
    const c = next;
    outcome = new Promise((done) => {
      const acc = new StreamUsage(40, 'chat');
      const relay = new SseRelay(res, { aborted: false }, acc, {
        kind: 'chat',
        clientWantsUsage: c.clientWantsUsage,
        end: () => '',
      });
      relay.start();
      // Chunks keep coming after a write said the socket is full (as an upstream's buffered bytes do before it pauses).
      let maxListeners = 0;
      for (const chunk of c.chunks) {
        relay.data(chunk, () => undefined);
        maxListeners = Math.max(maxListeners, res.listenerCount('drain'), res.listenerCount('close') - 1);
      }
      relay.end();
      done({ status: relay.status, tokens: acc.tokens(), maxListeners });
    });
    req.resume();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

async function relay(c: Case): Promise<Outcome> {
  next = c;
  const res = await fetch(url);
  const text = await res.text();
  return { text, ...(await outcome) };
}

const ev = (o: unknown) => `data: ${JSON.stringify(o)}\n\n`;
const content = (t: string) =>
  ev({ id: 'c1', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: t } }], usage: null });
const usageEv = ev({
  id: 'c1',
  object: 'chat.completion.chunk',
  choices: [],
  usage: { prompt_tokens: 11, completion_tokens: 5, total_tokens: 16 },
});
// Content that looks like the markers: a [DONE] and a usage object inside a string.
const tricky = ['Hello', ' the end is [DONE]', ' and "usage": {"prompt_tokens": 999}', ' bye'];
const wire = tricky.map(content).join('') + usageEv + 'data: [DONE]\n\n';

function split(s: string, size: number): Buffer[] {
  const b = Buffer.from(s);
  const out: Buffer[] = [];
  for (let i = 0; i < b.length; i += size) out.push(b.subarray(i, i + size));
  return out;
}

test('any chunking: the same events reach the client, usage stripped unless asked for, billed from it', async () => {
  const expected = tricky.map(content).join('') + 'data: [DONE]\n\n';
  for (const size of [wire.length, 1, 7, 13, 64, 200]) {
    const r = await relay({ chunks: split(wire, size), clientWantsUsage: false });
    expect([size, r.text]).toEqual([size, expected]);
    expect(r.status).toBe(200);
    expect(r.tokens).toEqual({ prompt: 11, completion: 5, estimated: false });
  }
  const withUsage = await relay({ chunks: split(wire, 29), clientWantsUsage: true });
  expect(withUsage.text).toBe(wire);
});

test('a congested client: one wait for drain at a time, however many chunks arrive meanwhile', async () => {
  const big = content('x'.repeat(64 * 1024));
  const r = await relay({ chunks: Array.from({ length: 40 }, () => Buffer.from(big)), clientWantsUsage: false });
  expect(r.text.length).toBe(big.length * 40 + 'data: [DONE]\n\n'.length);
  expect(r.maxListeners).toBeLessThanOrEqual(1);
});

test('a stream ending without usage or [DONE] is billed by the delivered text, counted from raw bytes', async () => {
  const parts = ['Xin chào', ' 😀 thế giới', ' '.repeat(10) + 'end'];
  const body = parts.map(content).join('');
  const chars = parts.join('').length;
  for (const size of [body.length, 5, 33]) {
    const r = await relay({ chunks: split(body, size), clientWantsUsage: false });
    expect(r.text).toBe(body + 'data: [DONE]\n\n');
    expect(r.tokens).toEqual({ prompt: 10, completion: Math.ceil(chars / 4), estimated: true });
  }
  // Over 64 KB of content: the deferred bytes are folded as they go, the count is the same.
  const many = Array.from({ length: 3000 }, (_, i) => content(`word${i} `));
  const total = Array.from({ length: 3000 }, (_, i) => `word${i} `).join('').length;
  const r = await relay({ chunks: split(many.join(''), 1000), clientWantsUsage: false });
  expect(r.tokens).toEqual({ prompt: 10, completion: Math.ceil(total / 4), estimated: true });
});

test('an upstream error event is forwarded and the stream is recorded as cut by the upstream (502)', async () => {
  const body = content('partial') + ev({ error: { message: 'overloaded', type: 'server_error' } });
  const r = await relay({ chunks: split(body, 16), clientWantsUsage: false });
  expect(r.text).toBe(body);
  expect(r.status).toBe(502);
  expect(r.tokens).toEqual({ prompt: 10, completion: 2, estimated: true });
});

test('an error event followed by [DONE] (vLLM, SGLang) is an upstream cut, whatever the chunking', async () => {
  const error = ev({
    error: { object: 'error', message: 'generation failed', type: 'InternalServerError', param: null, code: 500 },
  });
  const body = content('partial') + error + 'data: [DONE]\n\n';
  for (const size of [body.length, 16, 7]) {
    const r = await relay({ chunks: split(body, size), clientWantsUsage: false });
    expect(r.text).toBe(content('partial') + error);
    expect(r.status).toBe(502);
    expect(r.tokens).toEqual({ prompt: 10, completion: 2, estimated: true });
  }
});

test('events written another way (CRLF, comments, names) go through the general decoder as events', async () => {
  const crlf = wire.replace(/\n/g, '\r\n');
  const r = await relay({ chunks: split(crlf, 50), clientWantsUsage: false });
  expect(r.text).toBe(tricky.map(content).join('') + 'data: [DONE]\n\n');
  expect(r.tokens).toEqual({ prompt: 11, completion: 5, estimated: false });
  const named = ': keep-alive\n\n' + content('a') + 'event: message\ndata: ' + usageEv.slice(6) + 'data: [DONE]\n\n';
  const n = await relay({ chunks: [Buffer.from(named)], clientWantsUsage: true });
  expect(n.text).toBe(': keep-alive\n\n' + content('a') + usageEv + 'data: [DONE]\n\n');
  expect(n.tokens).toEqual({ prompt: 11, completion: 5, estimated: false });
});
