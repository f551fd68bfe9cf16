import { startEmulator, type Emulator } from '../../emulator/server';
import { OpenAIAdapter } from '../../src/providers/openai/adapter';
import { ApiError } from '../../src/errors';
import { ClientClosed, RequestAbort } from '../../src/net/abort';

/** The OpenAI-compatible adapter against the emulator over real HTTP: timeouts, transport failures, aborts. */

let emu: Emulator;
let adapter: OpenAIAdapter;
const chat = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] });

beforeAll(async () => {
  emu = await startEmulator();
  adapter = new OpenAIAdapter({
    id: 'emu',
    kind: 'openai',
    baseUrl: `${emu.url}/openai/v1`,
    apiKey: 'sk-upstream',
    timeoutMs: 300,
  });
});
afterAll(async () => {
  await adapter.close();
  await emu.close();
});
beforeEach(() => emu.control.reset());

const failure = (p: Promise<unknown>) =>
  p.then(
    () => null,
    (e) => e,
  );

test('sends the bearer key and JSON to the base path, reusing keep-alive connections', async () => {
  const ports = new Set<number>();
  emu.server.on('connection', (s) => ports.add(s.remotePort ?? 0));
  for (let i = 0; i < 6; i++) {
    const res = await adapter.chat(chat);
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body.toString()).object).toBe('chat.completion');
  }
  const req = emu.control.requests[0];
  expect(req.path).toBe('/openai/v1/chat/completions');
  expect(req.headers.authorization).toBe('Bearer sk-upstream');
  // Keep-alive: sequential calls share connections (undici may open a second while the first finishes).
  expect(ports.size).toBeLessThanOrEqual(2);
});

test('an upstream that does not answer in time is a 504 upstream_timeout', async () => {
  emu.control.addFault({ match: '/chat/completions', delayMs: 1500, times: 1 });
  const e = await failure(adapter.chat(chat));
  expect(e).toBeInstanceOf(ApiError);
  expect(e).toMatchObject({ status: 504, code: 'upstream_timeout' });
});

test("a refused connection is a 502 upstream_error; an aborted call throws its signal's reason", async () => {
  const dead = new OpenAIAdapter({ id: 'dead', kind: 'openai', baseUrl: 'http://127.0.0.1:1/v1', timeoutMs: 300 });
  expect(await failure(dead.chat(chat))).toMatchObject({ status: 502, code: 'upstream_error' });
  await dead.close();
  emu.control.addFault({ match: '/chat/completions', delayMs: 200, times: 1 });
  const ac = new RequestAbort();
  const p = failure(adapter.chat(chat, { abort: ac }));
  setTimeout(() => ac.abort(new ClientClosed()), 20);
  expect(await p).toBeInstanceOf(ClientClosed);
});

test('an upstream 4xx keeps its status, message, param and code', async () => {
  const e = await failure(
    adapter.postJson('/embeddings', JSON.stringify({ model: 'text-embedding-3-small', input: 'x', dimensions: 9999 })),
  );
  expect(e).toMatchObject({
    status: 400,
    param: 'dimensions',
    code: 'invalid_value',
    message: 'This model supports dimensions from 1 to 1536.',
  });
});

test('a large error answer is read to its end (connection reused), its head kept; the abort aborts', async () => {
  const http = await import('node:http');
  let connections = 0;
  let n = 0;
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      n++;
      if (req.url?.endsWith('/fail')) {
        res.writeHead(500, { 'content-type': 'text/plain' });
        res.end('upstream exploded ' + 'x'.repeat(200_000));
      } else if (req.url?.endsWith('/slow')) {
        setTimeout(() => res.end('{}'), 500);
      } else {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"ok":true}');
      }
    });
  });
  server.on('connection', () => connections++);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as import('node:net').AddressInfo;
  const a = new OpenAIAdapter({ id: 'raw', kind: 'openai', baseUrl: `http://127.0.0.1:${port}/v1`, timeoutMs: 2000 });
  try {
    for (let i = 0; i < 4; i++) {
      const e = await failure(a.postJson('/fail', '{}'));
      expect(e).toMatchObject({ status: 502, code: 'upstream_error' });
      expect(e.message).toMatch(/^The upstream provider failed \(HTTP 500\): upstream exploded x+$/);
      expect(e.message.length).toBeLessThan(700);
      const ok = await a.postJson('/x', '{}');
      expect(JSON.parse(ok.body.toString())).toEqual({ ok: true });
    }
    // Keep-alive across the error answers (undici may open a second connection while the first finishes).
    expect(n).toBe(8);
    expect(connections).toBeLessThanOrEqual(2);
    // The request's AbortSignal: an aborted call throws the signal's reason (ClientClosed: the client left).
    const gone = new RequestAbort();
    const p = failure(a.postJson('/slow', '{}', { abort: gone }));
    setTimeout(() => gone.abort(new ClientClosed()), 50);
    expect(await p).toBeInstanceOf(ClientClosed);
    // A signal that fired before the call: nothing is answered, the call throws the same reason.
    expect(await failure(a.postJson('/x', '{}', { abort: gone }))).toBeInstanceOf(ClientClosed);
  } finally {
    await a.close();
    await new Promise<void>((r) => {
      server.close(() => r());
      server.closeAllConnections();
    });
  }
});
