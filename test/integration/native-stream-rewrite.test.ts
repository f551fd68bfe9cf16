import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { startGateway, type TestGateway } from '../support/gateway';
import { verifyProjections } from '../../src/billing/ledger';

/**
 * Native pass-through streams (responses, messages, chat) relay the upstream's events, but never (1) promise a
 * stored response that GET /v1/responses/{id} cannot find, nor (2) name catalog internals in an error. A scripted
 * upstream (real HTTP, its events cut into small pieces sent apart, so events straddle network reads) plays
 * answers the emulator never gives: a final response with an id we cannot store, a failed response, error events
 * naming its provider id, host, deployment, key variable and upstream model.
 */

const PROVIDER = 'secret-prov-7';
const DEPLOYMENT = 'codex-x-east';
const KEY_ENV = 'CODEX_EAST_KEY';
const UPSTREAM_MODEL = 'internal-codex-2049';
let upstream: http.Server;
let host: string;
let gw: TestGateway;
let key: string;
/** What the upstream wrote on its last stream, to compare with what the client got. */
let lastWritten = '';

const sse = (type: string, data: Record<string, unknown>) =>
  `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
/** Error text as a careless upstream (or its proxy) writes it: every internal name the catalog knows. */
const leakyMessage = () =>
  `${PROVIDER} at ${host} failed: deployment ${DEPLOYMENT} of ${UPSTREAM_MODEL} rejected key ${KEY_ENV}`;

function responseEvents(script: string): string {
  const id = script === 'bad-id' ? 'resp with spaces/and slashes' : `resp_${script}_${Date.now()}`;
  const base = { id, object: 'response', created_at: 1, model: UPSTREAM_MODEL, store: true, output: [] as unknown[] };
  const usage = { input_tokens: 5, output_tokens: 2, total_tokens: 7 };
  const message = {
    id: 'msg_1',
    type: 'message',
    status: 'completed',
    role: 'assistant',
    content: [{ type: 'output_text', text: 'Hi there', annotations: [] }],
  };
  let seq = 0;
  const ev = (type: string, data: Record<string, unknown>) => sse(type, { sequence_number: seq++, ...data });
  let out = ev('response.created', { response: { ...base, status: 'in_progress' } }) + ': keep-alive\n\n';
  out += ev('response.output_text.delta', { item_id: 'msg_1', output_index: 0, content_index: 0, delta: 'Hi' });
  out += ev('response.output_text.delta', { item_id: 'msg_1', output_index: 0, content_index: 0, delta: ' there' });
  if (script === 'error') return out + ev('error', { code: 'server_error', message: leakyMessage(), param: null });
  if (script === 'failed')
    return (
      out +
      ev('response.failed', {
        response: { ...base, status: 'failed', error: { code: 'server_error', message: leakyMessage() }, usage },
      })
    );
  return out + ev('response.completed', { response: { ...base, status: 'completed', output: [message], usage } });
}

/** Writes `text` in pieces of a few bytes, apart in time, so the gateway reads events split across chunks. */
async function writeInPieces(res: http.ServerResponse, text: string): Promise<void> {
  lastWritten = text;
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  const buf = Buffer.from(text);
  for (let at = 0; at < buf.length; at += 61) {
    res.write(buf.subarray(at, at + 61));
    await new Promise((r) => setTimeout(r, 1));
  }
  res.end();
}

async function startUpstream(): Promise<void> {
  upstream = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      const b = JSON.parse(body || '{}');
      const script = JSON.stringify(b).match(/script:([\w-]+)/)?.[1] ?? 'ok';
      if (req.url === '/v1/responses') {
        if (b.stream) return void writeInPieces(res, responseEvents(script));
        const events = responseEvents(script)
          .split('\n')
          .filter((l) => l.startsWith('data: '))
          .map((l) => JSON.parse(l.slice(6)));
        res.writeHead(200, { 'content-type': 'application/json' });
        return void res.end(JSON.stringify(events[events.length - 1].response));
      }
      if (req.url === '/v1/chat/completions') {
        const chunk = {
          id: 'c1',
          object: 'chat.completion.chunk',
          created: 1,
          model: UPSTREAM_MODEL,
          choices: [{ index: 0, delta: { content: 'Hi' }, finish_reason: null }],
        };
        const error = { error: { message: leakyMessage(), type: 'server_error', param: null, code: null } };
        return void writeInPieces(res, `data: ${JSON.stringify(chunk)}\n\ndata: ${JSON.stringify(error)}\n\n`);
      }
      if (req.url === '/v1/messages') {
        const start = {
          message: {
            id: 'msg_1',
            type: 'message',
            role: 'assistant',
            model: UPSTREAM_MODEL,
            content: [],
            stop_reason: null,
            usage: { input_tokens: 5, output_tokens: 1 },
          },
        };
        return void writeInPieces(
          res,
          sse('message_start', start) +
            sse('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }) +
            sse('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'Hi' } }) +
            sse('error', { error: { type: 'overloaded_error', message: leakyMessage() } }),
        );
      }
      res.writeHead(404).end();
    });
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  host = `127.0.0.1:${(upstream.address() as AddressInfo).port}`;
}

beforeAll(async () => {
  await startUpstream();
  process.env[KEY_ENV] = 'k-east';
  process.env.SECRET_PROV_KEY = 'k';
  const catalog = {
    providers: {
      [PROVIDER]: { kind: 'openai', baseUrl: `http://${host}/v1`, apiKeyEnv: 'SECRET_PROV_KEY', timeoutMs: 5000 },
      'secret-anthropic-9': {
        kind: 'anthropic',
        baseUrl: `http://${host}`,
        apiKeyEnv: 'SECRET_PROV_KEY',
        timeoutMs: 5000,
      },
    },
    models: [
      {
        id: 'codex-x',
        mode: 'chat',
        api: 'responses',
        pricing: { inputPer1MTokens: 1000, outputPer1MTokens: 1000 },
        maxOutputTokens: 1000,
        deployments: [{ id: DEPLOYMENT, provider: PROVIDER, upstreamModel: UPSTREAM_MODEL, apiKeyEnv: KEY_ENV }],
      },
      {
        id: 'chat-x',
        mode: 'chat',
        provider: PROVIDER,
        upstreamModel: UPSTREAM_MODEL,
        pricing: { inputPer1MTokens: 1000, outputPer1MTokens: 1000 },
        maxOutputTokens: 1000,
      },
      {
        id: 'claude-x',
        mode: 'chat',
        provider: 'secret-anthropic-9',
        upstreamModel: UPSTREAM_MODEL,
        pricing: { inputPer1MTokens: 1000, outputPer1MTokens: 1000 },
        maxOutputTokens: 1000,
      },
    ],
  };
  const catalogPath = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'gw-native-rewrite-')), 'catalog.json');
  fs.writeFileSync(catalogPath, JSON.stringify(catalog));
  gw = await startGateway({ logLevel: 'silent', catalogPath }, { temporal: false });
  key = (await gw.account(1_000_000)).key;
});
afterAll(async () => {
  await gw?.close();
  await new Promise<void>((r) => upstream.close(() => r()));
});

/** Any internal name (built once the upstream listens: its host is one). */
const internals = () =>
  new RegExp([PROVIDER, 'secret-anthropic-9', DEPLOYMENT, KEY_ENV, UPSTREAM_MODEL, '127\\.0\\.0\\.1'].join('|'));
const client = () => new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0 });

/** A native /v1/responses stream through the official SDK: its events, and the raw text the client received. */
async function streamResponses(script: string): Promise<{ events: any[]; raw: string }> {
  const res = await fetch(`${gw.url}/v1/responses`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'codex-x', input: `script:${script}`, stream: true }),
  });
  expect(res.status).toBe(200);
  const raw = await res.text();
  const events = raw
    .split('\n')
    .filter((l) => l.startsWith('data: '))
    .map((l) => JSON.parse(l.slice(6)));
  return { events, raw };
}
const getStored = (id: string) =>
  fetch(`${gw.url}/v1/responses/${encodeURIComponent(id)}`, { headers: { authorization: `Bearer ${key}` } });

test('a stream that needs no change reaches the client byte for byte (comments too); store: true holds', async () => {
  const { events, raw } = await streamResponses('ok');
  expect(raw.replace(/: x-gateway-cost-vnd=.*\n\n$/, '')).toBe(lastWritten);
  const done = events[events.length - 1];
  expect(done).toMatchObject({ type: 'response.completed', response: { store: true } });
  expect((await getStored(done.response.id)).status).toBe(200);
});

test("the SDK sees store: false when the upstream's id cannot be stored, and nothing else changed", async () => {
  const stream = await client().responses.create({ model: 'codex-x', input: 'script:bad-id', stream: true });
  const events: any[] = [];
  for await (const e of stream) events.push(e);
  const done = events[events.length - 1];
  expect(done.type).toBe('response.completed');
  expect(done.response.store).toBe(false);
  expect(done.response.output[0].content[0].text).toBe('Hi there');
  expect(events.map((e) => e.sequence_number)).toEqual([0, 1, 2, 3]);
  expect((await getStored(done.response.id)).status).toBe(404);
  // Non-streamed, the same.
  const r = await client().responses.create({ model: 'codex-x', input: 'script:bad-id' });
  expect((r as unknown as { store: unknown }).store).toBe(false);
});

test('a failed response says store: false and its error names no internals', async () => {
  const { events } = await streamResponses('failed');
  const failed = events.find((e) => e.type === 'response.failed');
  expect(failed.response.store).toBe(false);
  expect(failed.response.error.message).toBe(
    'upstream at the upstream failed: deployment codex-x of codex-x rejected key upstream key',
  );
  expect((await getStored(failed.response.id)).status).toBe(404);
});

test('an upstream error event is redacted; the stream ends with a failed response that promises nothing', async () => {
  const { events } = await streamResponses('error');
  const error = events.find((e) => e.type === 'error');
  expect(error.message).toMatch(/^upstream at the upstream failed/);
  expect(JSON.stringify(error)).not.toMatch(internals());
  const last = events[events.length - 1];
  expect(last).toMatchObject({ type: 'response.failed', response: { store: false } });
});

test('native messages and chat streams: upstream error events are redacted', async () => {
  const anthropic = new Anthropic({ apiKey: key, baseURL: gw.url, maxRetries: 0 });
  const err = await (async () => {
    const s = await anthropic.messages.create({
      model: 'claude-x',
      max_tokens: 50,
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
    });
    for await (const _e of s) {
      /* read to the error */
    }
  })().catch((e) => e);
  expect(err).toBeInstanceOf(Error);
  expect(String(err.message)).toMatch(/upstream at the upstream failed/);
  expect(String(err.message)).not.toMatch(internals());

  const chatErr = await (async () => {
    const s = await client().chat.completions.create({
      model: 'chat-x',
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
    });
    for await (const _c of s) {
      /* read to the error */
    }
  })().catch((e) => e);
  expect(chatErr).toBeInstanceOf(Error);
  expect(String(chatErr.message)).toMatch(/upstream at the upstream failed/);
  expect(String(chatErr.message)).not.toMatch(internals());
  await gw.deps.credit.flush();
  expect(await verifyProjections(gw.deps.db)).toEqual([]);
});
