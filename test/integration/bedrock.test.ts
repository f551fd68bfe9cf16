import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { startGateway, type TestGateway } from '../support/gateway';
import { useAwsTestEnv } from '../support/cloudCredentials';
import { anthropicUsageCost, chargedVnd as chargedOf, fundedClient, usageRows } from '../support/records';
import { KINDS } from '../../src/providers/kinds';

/**
 * The `bedrock` provider kind over real HTTP against the emulated Bedrock runtime: Claude natively on /v1/messages
 * (InvokeModel, and the event stream turned back into Anthropic's SSE), translated on chat completions, a non-Claude
 * model through Converse; SigV4 from the AWS credential chain (here the environment); every usage field billed at
 * its price; upstream errors without the upstream's host, ARNs or account.
 */

const CLAUDE_PRICE = {
  inputPer1MTokens: 78000,
  cachedInputPer1MTokens: 7800,
  cacheWrite5mPer1MTokens: 97500,
  cacheWrite1hPer1MTokens: 156000,
  outputPer1MTokens: 390000,
};
const NOVA_PRICE = { inputPer1MTokens: 20000, cachedInputPer1MTokens: 5000, outputPer1MTokens: 80000 };

const cost = anthropicUsageCost;

let gw: TestGateway;
/** What the account was charged, its pending usage flushed first. */
async function chargedVnd(_deps: unknown, accountId: string): Promise<number> {
  await usageRows(gw.deps, accountId, 'id');
  return chargedOf(gw.deps, accountId);
}
let restoreAws: () => void;
beforeAll(async () => {
  restoreAws = useAwsTestEnv();
  const catalog = {
    providers: {
      aws: { kind: 'bedrock', region: 'us-east-1', baseUrl: '${EMULATOR_URL}/bedrock', timeoutMs: 5000 },
    },
    models: [
      {
        id: 'claude-sonnet-4-6',
        mode: 'chat',
        provider: 'aws',
        upstreamModel: 'us.anthropic.claude-sonnet-4-6-v1:0',
        pricing: CLAUDE_PRICE,
        maxOutputTokens: 1000,
      },
      {
        id: 'nova-pro',
        mode: 'chat',
        provider: 'aws',
        upstreamModel: 'amazon.nova-pro-v1:0',
        pricing: NOVA_PRICE,
        maxOutputTokens: 1000,
      },
    ],
  };
  const catalogPath = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'gw-bedrock-')), 'catalog.json');
  fs.writeFileSync(catalogPath, JSON.stringify(catalog));
  gw = await startGateway({ logLevel: 'warn', catalogPath }, { temporal: false });
});
afterAll(async () => {
  await gw.close();
  restoreAws();
});
afterEach(() => gw.emulator.control.reset());

async function anthropicClient() {
  const acc = await gw.account(5_000_000);
  return { ...acc, client: new Anthropic({ apiKey: acc.key, baseURL: gw.url, maxRetries: 0 }) };
}

const PROMPT = 'hello claude on bedrock [cache_read=300] [cache_write=200] ' + 'pad '.repeat(400);

test('/v1/messages on Claude via InvokeModel: Anthropic JSON back, each usage field billed at its price', async () => {
  const { client, accountId } = await anthropicClient();
  const msg = await client.messages.create({
    model: 'claude-sonnet-4-6',
    max_tokens: 200,
    messages: [{ role: 'user', content: PROMPT }],
  });
  expect(msg.content[0]).toMatchObject({ type: 'text', text: expect.stringContaining('You said: hello claude') });
  expect(msg.usage).toMatchObject({ cache_read_input_tokens: 300, cache_creation_input_tokens: 200 });
  expect(await chargedVnd(gw.deps, accountId)).toBe(cost(CLAUDE_PRICE, msg.usage as never));
  const seen = gw.emulator.control.requests.find((r) => r.path.endsWith('/invoke'))!;
  expect(seen.path).toBe(`/bedrock/model/${encodeURIComponent('us.anthropic.claude-sonnet-4-6-v1:0')}/invoke`);
  expect(seen.body).toMatchObject({ anthropic_version: 'bedrock-2023-05-31', max_tokens: 200 });
  expect(seen.body).not.toHaveProperty('model');
  expect(String(seen.headers.authorization)).toMatch(/Credential=AKIAEMULATOR00000000\/\d{8}\/us-east-1\/bedrock\//);
});

test('/v1/messages stream: the event stream comes out as Anthropic SSE, billed on its usage', async () => {
  const { client, accountId } = await anthropicClient();
  const stream = client.messages.stream({
    model: 'claude-sonnet-4-6',
    max_tokens: 200,
    messages: [{ role: 'user', content: PROMPT }],
  });
  let text = '';
  for await (const e of stream) {
    expect(JSON.stringify(e)).not.toContain('amazon-bedrock');
    if (e.type === 'content_block_delta' && e.delta.type === 'text_delta') text += e.delta.text;
  }
  const final = await stream.finalMessage();
  expect(text).toContain('You said: hello claude on bedrock');
  expect(final.usage).toMatchObject({ cache_read_input_tokens: 300, cache_creation_input_tokens: 200 });
  expect(await chargedVnd(gw.deps, accountId)).toBe(cost(CLAUDE_PRICE, final.usage as never));
  expect(gw.emulator.control.requests.some((r) => r.path.endsWith('/invoke-with-response-stream'))).toBe(true);
});

test('chat completions on Claude (translated) and on a Converse model, plain and streamed', async () => {
  const { client, accountId } = await fundedClient(gw, 5_000_000);
  const c = await client.chat.completions.create({
    model: 'claude-sonnet-4-6',
    messages: [{ role: 'user', content: 'hi from chat' }],
  });
  expect(c.choices[0].message.content).toBe('You said: hi from chat');
  const nova = await client.chat.completions.create({
    model: 'nova-pro',
    messages: [
      { role: 'system', content: 'be brief' },
      { role: 'user', content: 'hi nova [cache_read=40] ' + 'pad '.repeat(100) },
    ],
  });
  expect(nova.choices[0].message.content).toContain('You said: hi nova');
  expect(nova.usage!.prompt_tokens_details?.cached_tokens).toBe(40);
  const seen = gw.emulator.control.requests.find((r) => r.path.endsWith('/converse'))!;
  expect(seen.body).toMatchObject({ system: [{ text: 'be brief' }], inferenceConfig: { maxTokens: 1000 } });
  const before = await chargedVnd(gw.deps, accountId);
  const stream = await client.chat.completions.create({
    model: 'nova-pro',
    messages: [{ role: 'user', content: 'stream nova [cache_read=40] ' + 'pad '.repeat(100) }],
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let usage: any;
  for await (const ch of stream) {
    text += ch.choices[0]?.delta?.content ?? '';
    if (ch.usage) usage = ch.usage;
  }
  expect(text).toContain('You said: stream nova');
  expect(usage.prompt_tokens_details.cached_tokens).toBe(40);
  const uncached = usage.prompt_tokens - 40;
  expect((await chargedVnd(gw.deps, accountId)) - before).toBe(
    cost(NOVA_PRICE, { input_tokens: uncached, cache_read_input_tokens: 40, output_tokens: usage.completion_tokens }),
  );
  expect(gw.emulator.control.requests.some((r) => r.path.endsWith('/converse-stream'))).toBe(true);
});

// Refused credentials are a 502 naming nothing of the upstream.
test("an upstream error reaches the client without the upstream's host, ARN or account", async () => {
  const { client } = await anthropicClient();
  const { client: chat } = await fundedClient(gw);
  const host = new URL(gw.emulator.url).host;
  for (const model of ['claude-sonnet-4-6', 'nova-pro']) {
    gw.emulator.control.addFault({ match: '/bedrock/', status: 400, times: 2 });
    const e1 = await client.messages
      .create({ model, max_tokens: 10, messages: [{ role: 'user', content: 'x' }] })
      .catch((e) => e);
    expect(e1.status).toBe(400);
    const e2 = await chat.chat.completions
      .create({ model, messages: [{ role: 'user', content: 'x' }] })
      .catch((e) => e);
    expect(e2.status).toBe(400);
    for (const e of [e1, e2]) {
      const text = JSON.stringify(e.error) + e.message;
      expect(text).toContain('emulated failure 400');
      expect(text).not.toContain(host);
      expect(text).not.toMatch(/arn:aws|123456789012|127\.0\.0\.1/);
    }
  }
  gw.emulator.control.addFault({ match: '/bedrock/', status: 403, times: 1 });
  const denied = await client.messages
    .create({ model: 'claude-sonnet-4-6', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] })
    .catch((e) => e);
  expect(denied.status).toBe(502);
  expect(JSON.stringify(denied.error)).not.toMatch(/arn:aws|AKIA|127\.0\.0\.1/);
});

test('a catalog entry carrying a key, or an apiKeyEnv on a cloud kind, is refused at load', async () => {
  const { Catalog } = await import('../../src/catalog/catalog');
  const base = { models: [] };
  expect(
    () =>
      new Catalog(
        { ...base, providers: { a: { kind: 'bedrock', region: 'us-east-1', apiKeyEnv: 'X' } } } as never,
        KINDS,
      ),
  ).toThrow(/apiKeyEnv/);
  expect(
    () => new Catalog({ ...base, providers: { a: { kind: 'openai', baseUrl: 'https://u:p@h/v1' } } } as never, KINDS),
  ).toThrow(/credentials/);
  expect(
    () =>
      new Catalog(
        {
          ...base,
          providers: { a: { kind: 'openai', baseUrl: 'https://h/v1', apiKeyEnv: 'sk-live-123' } },
        } as never,
        KINDS,
      ),
  ).toThrow(/invalid catalog/);
});

test('a Converse model calls tools, plain and streamed, and is listed under its own vendor', async () => {
  const { client, key } = await fundedClient(gw, 5_000_000);
  const tools = [
    {
      type: 'function' as const,
      function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
    },
  ];
  const messages = [{ role: 'user' as const, content: 'weather in Hanoi?' }];
  const c = await client.chat.completions.create({ model: 'nova-pro', messages, tools });
  expect(c.choices[0].finish_reason).toBe('tool_calls');
  expect(c.choices[0].message.tool_calls![0]).toMatchObject({ function: { name: 'get_weather' } });
  const seen = gw.emulator.control.requests.find((r) => r.path.endsWith('/converse'))!;
  expect(seen.body).toMatchObject({ toolConfig: { tools: [{ toolSpec: { name: 'get_weather' } }] } });
  const stream = await client.chat.completions.create({ model: 'nova-pro', messages, tools, stream: true });
  let args = '';
  let finish: string | null = null;
  for await (const ch of stream) {
    args += ch.choices[0]?.delta?.tool_calls?.[0]?.function?.arguments ?? '';
    finish = ch.choices[0]?.finish_reason ?? finish;
  }
  expect(JSON.parse(args)).toEqual({ example: 'example' });
  expect(finish).toBe('tool_calls');
  const list = (await (await fetch(`${gw.url}/v1/models`, { headers: { authorization: `Bearer ${key}` } })).json()) as {
    data: { id: string; owned_by: string }[];
  };
  expect(Object.fromEntries(list.data.map((m) => [m.id, m.owned_by]))).toMatchObject({
    'nova-pro': 'amazon',
    'claude-sonnet-4-6': 'anthropic',
  });
});

test('no AWS credentials anywhere in the chain is a 502 naming none of it', async () => {
  const { BedrockAdapter } = await import('../../src/providers/bedrock/adapter');
  const keep = { ...process.env };
  for (const k of ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_PROFILE']) delete process.env[k];
  Object.assign(process.env, { AWS_SHARED_CREDENTIALS_FILE: '/nonexistent/c', AWS_CONFIG_FILE: '/nonexistent/f' });
  const a = new BedrockAdapter(gw.deps.catalog.providers.get('aws')!);
  try {
    const body = JSON.stringify({ model: 'anthropic.claude-sonnet-4-6-v1:0', max_tokens: 5, messages: [] });
    await expect(a.messagesWhole(body, {})).rejects.toMatchObject({
      status: 502,
      message: 'The gateway could not authenticate to the upstream provider.',
    });
  } finally {
    await a.close();
    for (const k of ['AWS_SHARED_CREDENTIALS_FILE', 'AWS_CONFIG_FILE']) delete process.env[k];
    Object.assign(process.env, keep);
  }
});

test('an exception frame mid-stream ends the stream with an error event naming no ARN or account', async () => {
  const { client } = await anthropicClient();
  const stream = client.messages.stream({
    model: 'claude-sonnet-4-6',
    max_tokens: 200,
    messages: [{ role: 'user', content: 'fail halfway EMULATOR_STREAM_EXCEPTION please' }],
  });
  const err = await stream.finalMessage().catch((e) => e);
  expect(String(err?.message)).toMatch(/Model stream failed/);
  expect(String(err?.message)).not.toMatch(/arn:aws|123456789012/);
});
