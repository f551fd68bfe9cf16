import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { startGateway, type TestGateway } from '../support/gateway';
import { MAX_ECHO } from '../../src/text/clip';

/**
 * Error messages quote what the client sent (a model name, a path, an id, a field, a header), each value cut to
 * MAX_ECHO characters: a 100 KB name is not echoed whole. A refusal about the client's own input is not redacted:
 * a host it named stays as named even when it is also an upstream's host (the emulator's, here 127.0.0.1).
 */

let gw: TestGateway;
let key: string;
beforeAll(async () => {
  gw = await startGateway({ logLevel: 'silent' });
  ({ key } = await gw.account(1_000_000));
});
afterAll(async () => {
  await gw?.close();
});

const HUGE = 'm'.repeat(100 * 1024);
// Node refuses request heads over 16 KB (431) before the gateway sees them: paths and headers are 12 KB.
const LONG = 'p'.repeat(12 * 1024);
/** The most an error message may be: its own words (well under 400 characters) around one clipped value. */
const MAX_MESSAGE = MAX_ECHO + 400;

async function call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(gw.url + path, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as any };
}

/** The error's message and param are bounded, and the value was quoted (clipped), not dropped. */
function expectClipped(err: { message: string; param?: string | null }, value: string) {
  expect(err.message.length).toBeLessThanOrEqual(MAX_MESSAGE);
  expect(err.message).toContain(value.slice(0, 50));
  if (err.param) expect(err.param.length).toBeLessThanOrEqual(MAX_ECHO);
}

test('OpenAI SDK: a 100 KB model name comes back clipped in the 404', async () => {
  const client = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0 });
  const e = await client.chat.completions
    .create({ model: HUGE, messages: [{ role: 'user', content: 'hi' }] })
    .catch((x) => x);
  expect(e).toBeInstanceOf(OpenAI.NotFoundError);
  expectClipped(e.error, HUGE);
  const m = await client.models.retrieve(LONG).catch((x) => x);
  expect(m.status).toBe(404);
  expectClipped(m.error, LONG);
});

test('Anthropic SDK: a 100 KB model name comes back clipped in the 404', async () => {
  const client = new Anthropic({ apiKey: key, baseURL: gw.url, maxRetries: 0 });
  const e = await client.messages
    .create({ model: HUGE, max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] })
    .catch((x) => x);
  expect(e).toBeInstanceOf(Anthropic.NotFoundError);
  expect(e.error.type).toBe('error');
  expectClipped(e.error.error, HUGE);
});

test.each([
  [
    'message role (chat)',
    'POST',
    '/v1/chat/completions',
    { model: 'gpt-4o-mini', messages: [{ role: HUGE, content: 'hi' }] },
    HUGE,
  ],
  [
    'message role (messages)',
    'POST',
    '/v1/messages',
    { model: 'claude-sonnet-4-6', max_tokens: 5, messages: [{ role: HUGE, content: 'hi' }] },
    HUGE,
  ],
  ['unknown video field', 'POST', '/v1/videos', { model: 'seedance-2-0', prompt: 'p', [HUGE]: 1 }, HUGE],
  [
    'previous_response_id',
    'POST',
    '/v1/responses',
    { model: 'gpt-4o-mini', input: 'x', previous_response_id: HUGE },
    HUGE,
  ],
  ['video size', 'POST', '/v1/videos', { model: 'seedance-2-0', prompt: 'p', size: HUGE }, HUGE],
  ['video list status', 'GET', `/v1/videos?status=${LONG}`, undefined, LONG],
  ['video id', 'GET', `/v1/videos/${LONG}`, undefined, LONG],
  ['stored response id', 'GET', `/v1/responses/${LONG}`, undefined, LONG],
  ['unknown path', 'GET', `/v1/${LONG}`, undefined, LONG],
] as const)('%s: the echoed value is clipped', async (_name, method, path, body, value) => {
  const r = await call(
    method,
    path,
    body,
    path.startsWith('/v1/messages') ? { 'anthropic-version': '2023-06-01' } : {},
  );
  expect(r.status).toBeGreaterThanOrEqual(400);
  const err = r.body.type === 'error' ? r.body.error : r.body.error;
  if (value) expectClipped(err, value);
  else expect(err.message.length).toBeLessThanOrEqual(MAX_MESSAGE);
});

test('a 12 KB Content-Type is clipped in the 415', async () => {
  const r = await call('POST', '/v1/chat/completions', '{}', { 'content-type': `text/${LONG}` });
  expect(r.status).toBe(415);
  expectClipped(r.body.error, LONG);
});

test('the SSRF refusal names the host the client gave, even where it is also the upstream host', async () => {
  expect(new URL(gw.emulator.url).hostname).toBe('127.0.0.1');
  const r = await call('POST', '/v1/videos', {
    model: 'seedance-2-0',
    prompt: 'p',
    input_reference: 'http://127.0.0.1:9/x.png',
  });
  expect(r.status).toBe(400);
  expect(r.body.error).toMatchObject({ param: 'input_reference', code: 'image_url_forbidden' });
  expect(r.body.error.message).toContain("the URL's host 127.0.0.1 is not a public address");
});
