import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { startGateway, type TestGateway } from '../support/gateway';

/**
 * The default catalog's model names as coding clients send them: Claude Code's built-in and dated Claude names reach
 * the Claude models through the Anthropic provider's patterns, Codex's gpt-5.x-codex names reach gpt-5-codex; the
 * usage record names the catalog model. Names no id, alias or pattern matches stay 404 model_not_found.
 */

let gw: TestGateway;
let key: string;
beforeAll(async () => {
  gw = await startGateway({ logLevel: 'warn' }, { temporal: false });
  ({ key } = await gw.account(5_000_000));
});
afterAll(() => gw.close());

async function lastUsageModel(): Promise<string> {
  const body = (await (await fetch(`${gw.url}/v1/usage?limit=1`, { headers: { authorization: `Bearer ${key}` } })).json()) as { data: { model: string }[] };
  return body.data[0].model;
}

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
  const listed = (await (await fetch(`${gw.url}/v1/models/${name}`, { headers: { authorization: `Bearer ${key}` } })).json()) as { id: string };
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

test('names no id, alias or pattern matches are 404 model_not_found on every interface', async () => {
  const c = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0 });
  await expect(c.chat.completions.create({ model: 'gpt-4-unknown', messages: [{ role: 'user', content: 'x' }] })).rejects.toMatchObject({ status: 404, code: 'model_not_found' });
  await expect(c.responses.create({ model: 'claude', input: 'x' })).rejects.toMatchObject({ status: 404, code: 'model_not_found' });
  const a = new Anthropic({ apiKey: key, baseURL: gw.url, maxRetries: 0 });
  await expect(a.messages.create({ model: 'sonnet-4', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] })).rejects.toMatchObject({ status: 404, error: { type: 'error', error: { type: 'not_found_error' } } });
});

test('GET /v1/models lists each model\'s patterns', async () => {
  const list = (await (await fetch(`${gw.url}/v1/models`, { headers: { authorization: `Bearer ${key}` } })).json()) as { data: { id: string; alias_patterns?: string[] }[] };
  const byId = new Map(list.data.map((m) => [m.id, m.alias_patterns]));
  expect(byId.get('claude-sonnet-4-6')).toEqual(['claude-*']);
  expect(byId.get('gpt-5-codex')).toEqual(['gpt-5*codex*', 'codex-*']);
  expect(byId.get('gpt-4o-mini')).toBeUndefined();
});
