import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { startGateway, type TestGateway } from '../support/gateway';

/**
 * The default catalog's model names as coding clients send them: Claude Code's built-in and dated Claude names reach
 * the Claude models through the Anthropic provider's patterns, Codex's gpt-5.x-codex and default gpt-*-sol names
 * reach gpt-5-codex; the usage record names the catalog model and its price. Names no id, alias or pattern matches
 * stay 404 model_not_found.
 */

let gw: TestGateway;
let key: string;
beforeAll(async () => {
  gw = await startGateway({ logLevel: 'warn' }, { temporal: false });
  ({ key } = await gw.account(5_000_000));
});
afterAll(() => gw.close());

async function lastUsage(): Promise<{ model: string; cost_vnd: number; tokens: unknown }> {
  const body = (await (
    await fetch(`${gw.url}/v1/usage?limit=1`, { headers: { authorization: `Bearer ${key}` } })
  ).json()) as { data: { model: string; cost_vnd: number; tokens: unknown }[] };
  const { model, cost_vnd, tokens } = body.data[0];
  return { model, cost_vnd, tokens };
}
const lastUsageModel = async () => (await lastUsage()).model;

test.each([
  ['claude-sonnet-4-6-20260101', 'claude-sonnet-4-6'],
  ['claude-3-7-sonnet-latest', 'claude-sonnet-4-6'],
  ['claude-opus-4-7', 'claude-opus-4-6'],
  ['claude-3-haiku-20240307', 'claude-haiku-4-5'],
])('Claude Code name %s runs on %s', async (name, model) => {
  const c = new Anthropic({ apiKey: key, baseURL: gw.url, maxRetries: 0 });
  const m = await c.messages.create({ model: name, max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] });
  expect(m.content).toEqual([{ type: 'text', text: 'You said: hi' }]);
  expect(await lastUsageModel()).toBe(model);
  const listed = (await (
    await fetch(`${gw.url}/v1/models/${name}`, { headers: { authorization: `Bearer ${key}` } })
  ).json()) as { id: string };
  expect(listed.id).toBe(model);
});

test('Codex names (gpt-5.x-codex) run on gpt-5-codex over the Responses API', async () => {
  const c = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0 });
  for (const name of ['gpt-5.1-codex-max', 'gpt-5.2-codex']) {
    const r = await c.responses.create({ model: name, input: 'hi' });
    expect(r.output_text).toBe('You said: hi');
    expect(await lastUsageModel()).toBe('gpt-5-codex');
  }
});

test("Codex CLI's default names (gpt-6.2-sol, gpt-6.1-sol) run on gpt-5-codex, billed at its prices", async () => {
  const c = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0 });
  await c.responses.create({ model: 'gpt-5-codex', input: 'hi' });
  const own = await lastUsage();
  for (const name of ['gpt-6.2-sol', 'gpt-6.1-sol']) {
    const r = await c.responses.create({ model: name, input: 'hi' });
    expect(r.output_text).toBe('You said: hi');
    expect(r.model).toBe('gpt-5-codex');
    expect(await lastUsage()).toEqual(own);
  }
});

test('names no id, alias or pattern matches are 404 model_not_found on every interface', async () => {
  const c = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0 });
  await expect(
    c.chat.completions.create({ model: 'gpt-4-unknown', messages: [{ role: 'user', content: 'x' }] }),
  ).rejects.toMatchObject({ status: 404, code: 'model_not_found' });
  await expect(c.responses.create({ model: 'claude', input: 'x' })).rejects.toMatchObject({
    status: 404,
    code: 'model_not_found',
  });
  const a = new Anthropic({ apiKey: key, baseURL: gw.url, maxRetries: 0 });
  await expect(
    a.messages.create({ model: 'sonnet-4', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }),
  ).rejects.toMatchObject({ status: 404, error: { type: 'error', error: { type: 'not_found_error' } } });
});

test("GET /v1/models lists each model's patterns", async () => {
  const list = (await (await fetch(`${gw.url}/v1/models`, { headers: { authorization: `Bearer ${key}` } })).json()) as {
    data: { id: string; alias_patterns?: string[] }[];
  };
  const byId = new Map(list.data.map((m) => [m.id, m.alias_patterns]));
  expect(byId.get('claude-sonnet-4-6')).toEqual(['claude-*']);
  expect(byId.get('gpt-5-codex')).toEqual(['gpt-5*codex*', 'codex-*', 'gpt-*-sol']);
  expect(byId.get('gpt-4o-mini')).toBeUndefined();
});

describe("an output cap above the model's, asked for under a client's own model name", () => {
  const upstreamBodies = (path: string) =>
    gw.emulator.control.requests.filter((r) => r.path === path).map((r) => r.body as Record<string, unknown>);

  test.each([false, true])(
    'is clamped on /v1/messages by pattern and alias, and said in a header (stream: %s)',
    async (stream) => {
      for (const name of ['claude-opus-4-7', 'claude-opus-4-5']) {
        gw.emulator.control.reset();
        const c = new Anthropic({ apiKey: key, baseURL: gw.url, maxRetries: 0, timeout: 60_000 });
        const { response } = await c.messages
          .create({ model: name, max_tokens: 128000, stream, messages: [{ role: 'user', content: 'hi' }] })
          .withResponse();
        expect(response.headers.get('x-gateway-max-tokens-clamped')).toBe('128000->64000');
        expect(upstreamBodies('/anthropic/v1/messages').map((b) => b.max_tokens)).toEqual([64000]);
      }
    },
  );

  test("named by the model's own id, it keeps the upstream's refusal", async () => {
    const c = new Anthropic({ apiKey: key, baseURL: gw.url, maxRetries: 0, timeout: 60_000 });
    await expect(
      c.messages.create({ model: 'claude-opus-4-6', max_tokens: 128000, messages: [{ role: 'user', content: 'hi' }] }),
    ).rejects.toMatchObject({
      status: 400,
      error: { error: { message: expect.stringContaining('max_tokens is too large: 128000') } },
    });
    const o = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    await expect(
      o.responses.create({ model: 'gpt-5-codex', input: 'hi', max_output_tokens: 200000 }),
    ).rejects.toMatchObject({ status: 400 });
  });

  test('is clamped on /v1/responses and /v1/chat/completions by pattern', async () => {
    gw.emulator.control.reset();
    const o = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const r = await o.responses
      .create({ model: 'gpt-5.2-codex', input: 'hi', max_output_tokens: 200000 })
      .withResponse();
    expect(r.response.headers.get('x-gateway-max-tokens-clamped')).toBe('200000->128000');
    expect(upstreamBodies('/openai/v1/responses').map((b) => b.max_output_tokens)).toEqual([128000]);
    const c = await o.chat.completions
      .create({ model: 'claude-3-haiku-20240307', messages: [{ role: 'user', content: 'hi' }], max_tokens: 100000 })
      .withResponse();
    expect(c.response.headers.get('x-gateway-max-tokens-clamped')).toBe('100000->64000');
    expect(upstreamBodies('/anthropic/v1/messages').map((b) => b.max_tokens)).toEqual([64000]);
  });
});

test('GET /v1/models and /public/models list the interfaces each model answers on', async () => {
  const authed = (await (
    await fetch(`${gw.url}/v1/models`, { headers: { authorization: `Bearer ${key}` } })
  ).json()) as { data: { id: string; interfaces: string[] }[] };
  const pub = (await (await fetch(`${gw.url}/public/models`)).json()) as {
    data: { id: string; interfaces: string[] }[];
  };
  for (const list of [authed, pub]) {
    const byId = new Map(list.data.map((m) => [m.id, m.interfaces]));
    for (const id of ['gpt-4o-mini', 'claude-sonnet-4-6', 'gpt-5-codex', 'gemini-2.5-flash'])
      expect(byId.get(id)).toEqual(['chat.completions', 'messages', 'responses', 'gemini']);
    expect(byId.get('text-embedding-3-small')).toEqual(['embeddings', 'gemini']);
    expect(byId.get('tts-1')).toEqual(['audio.speech']);
  }
});
