import fs from 'node:fs';
import path from 'node:path';
import OpenAI, { toFile } from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { startGateway, type TestGateway } from '../support/gateway';
import type { Pricing } from '../../src/catalog/catalog';

/**
 * The bill follows the provider's usage fields, each at its own catalog price: uncached input, cache reads, cache
 * writes by TTL (Anthropic), output with reasoning. The emulated upstreams report cache and reasoning usage when the
 * prompt carries the markers [cache_read=N], [cache_write=N], [cache_write_1h=N], [reasoning=N]. For every path
 * (native, translated, bridged; plain and streamed) the test computes the cost from the usage the client received
 * and the prices GET /v1/models publishes, and checks that the response reported it (x-gateway-cost-vnd header, or
 * the stream's closing SSE comment), that the usage record and the ledger hold exactly that, and that the client's
 * usage object carries the cache fields in its interface's shape.
 */

let gw: TestGateway;
let prices: Map<string, Pricing>;
beforeAll(async () => {
  gw = await startGateway({ logLevel: 'warn' }, { temporal: false });
  const { key } = await gw.account(0);
  const list = (await getJson('/v1/models', key)) as { data: { id: string; pricing: Pricing }[] };
  prices = new Map(list.data.map((m) => [m.id, m.pricing]));
});
afterAll(() => gw.close());
afterEach(() => gw.emulator.control.reset());

/**
 * Long enough that the request's bytes bound every prompt token the markers add (the funds check is an upper bound).
 */
const PADDING = 'lorem ipsum dolor sit amet '.repeat(2500);
const CLAUDE_MARKERS = '[cache_read=20000] [cache_write=8000] [cache_write_1h=4000]';

interface Fields {
  input: number;
  cacheRead: number;
  write5m: number;
  write1h: number;
  output: number;
}

/** The fields of a prompt with CLAUDE_MARKERS: 32000 of its prompt tokens are cache reads and writes by TTL. */
const claudeCacheFields = (promptTokens: number, output: number): Fields => ({
  input: promptTokens - 32000,
  cacheRead: 20000,
  write5m: 8000,
  write1h: 4000,
  output,
});

/** The fields of a prompt that read `cacheRead` tokens from the cache and wrote none. */
const cacheReadFields = (input: number, cacheRead: number, output: number): Fields => ({
  input,
  cacheRead,
  write5m: 0,
  write1h: 0,
  output,
});

/** The provider's bill, computed here from the published prices: each field at its price, rounded up once. */
function expectedCost(model: string, f: Fields): number {
  const p = prices.get(model)!;
  const inP = p.inputPer1MTokens!;
  const sum =
    f.input * inP +
    f.cacheRead * (p.cachedInputPer1MTokens ?? inP) +
    f.write5m * (p.cacheWrite5mPer1MTokens ?? inP) +
    f.write1h * (p.cacheWrite1hPer1MTokens ?? inP) +
    f.output * p.outputPer1MTokens!;
  expect(Number.isSafeInteger(sum)).toBe(true);
  return Math.ceil(sum / 1_000_000);
}

/** A funded account with its auth headers and SDK clients that do not retry. */
async function account() {
  const a = await gw.account(5_000_000);
  return {
    ...a,
    headers: { authorization: `Bearer ${a.key}` },
    openai: new OpenAI({ apiKey: a.key, baseURL: `${gw.url}/v1`, maxRetries: 0 }),
    anthropic: new Anthropic({ apiKey: a.key, baseURL: gw.url, maxRetries: 0 }),
  };
}

async function getJson(path: string, key: string): Promise<any> {
  return (await fetch(`${gw.url}${path}`, { headers: { authorization: `Bearer ${key}` } })).json();
}

async function lastUsage(key: string): Promise<any> {
  const body = (await getJson('/v1/usage', key)) as { data: any[] };
  expect(body.data).toHaveLength(1);
  return body.data[0];
}

async function balance(key: string): Promise<number> {
  return ((await getJson('/v1/account', key)) as { balance_vnd: number }).balance_vnd;
}

/** What an answer reported: its cost and usage id (headers, or the closing comment of a stream). */
interface Reported {
  reported: number;
  usageId: string;
}

const reportedBy = (res: Response): Reported => ({
  reported: Number(res.headers.get('x-gateway-cost-vnd')),
  usageId: res.headers.get('x-gateway-usage-id')!,
});

/** The usage record, the ledger and the reported cost all equal the expected cost. */
async function expectBilled(key: string, { reported, usageId }: Reported, cost: number): Promise<any> {
  expect(reported).toBe(cost);
  const u = await lastUsage(key);
  expect(u.id).toBe(usageId);
  expect(u.cost_vnd).toBe(cost);
  expect(await balance(key)).toBe(5_000_000 - cost);
  return u;
}

/** Raw SSE: the events (comment blocks apart) and the cost comment that ends the stream. */
async function sse(res: Response): Promise<Reported & { events: any[] }> {
  expect(res.status).toBe(200);
  const blocks = (await res.text()).split('\n\n').filter((b) => b.trim());
  const comment = blocks.filter((b) => b.startsWith(':'));
  expect(comment).toHaveLength(1);
  const m = /^: x-gateway-cost-vnd=(\d+) x-gateway-usage-id=([0-9a-f-]{36})$/.exec(comment[0])!;
  expect(m).not.toBeNull();
  const events = blocks
    .filter((b) => !b.startsWith(':') && !b.endsWith('[DONE]'))
    .map((b) => JSON.parse(/^data: (.*)$/m.exec(b)![1]));
  return { events, reported: Number(m[1]), usageId: m[2] };
}

/**
 * A billed answer, streamed or not: the usage the client got (found by `pick` in a stream's events), the reported cost
 * and usage id.
 */
async function billedAnswer<U>(
  res: Response,
  stream: boolean,
  pick: (events: any[]) => U,
  plain: (body: any) => U,
): Promise<Reported & { usage: U }> {
  if (stream) {
    const s = await sse(res);
    return { usage: pick(s.events), reported: s.reported, usageId: s.usageId };
  }
  return { usage: plain(await res.json()), ...reportedBy(res) };
}
const lastChunkUsage = (events: any[]) => events[events.length - 1].usage as OpenAI.CompletionUsage;
const completedUsage = (events: any[]) =>
  events.find((e) => e.type === 'response.completed').response.usage as OpenAI.Responses.ResponseUsage;

const post = (path: string, headers: Record<string, string>, body: unknown) =>
  fetch(`${gw.url}${path}`, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
    body: JSON.stringify(body),
  });

type Account = Awaited<ReturnType<typeof account>>;

const chatBody = (model: string, markers: string) => ({
  model,
  messages: [
    { role: 'system' as const, content: PADDING },
    { role: 'user' as const, content: `hello ${markers}` },
  ],
});

/** A chat completion, streamed with include_usage or not: the usage the client got and what was reported. */
async function chatAnswer(a: Account, stream: boolean, body: object) {
  const res = await post('/v1/chat/completions', a.headers, {
    ...body,
    ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
  });
  return billedAnswer(res, stream, lastChunkUsage, (b: OpenAI.ChatCompletion) => b.usage!);
}

/** A response to `input` with PADDING as instructions, streamed or not: its usage and what was reported. */
async function responsesAnswer(a: Account, stream: boolean, model: string, input: string) {
  const res = await post('/v1/responses', a.headers, {
    model,
    instructions: PADDING,
    input,
    ...(stream ? { stream: true } : {}),
  });
  return billedAnswer(res, stream, completedUsage, (b: OpenAI.Responses.Response) => b.usage!);
}

/** The prompt markers for `cacheRead` cached tokens and, if given, `reasoning` reasoning tokens. */
const cacheMarkers = (cacheRead: number, reasoning?: number) =>
  `[cache_read=${cacheRead}]` + (reasoning === undefined ? '' : ` [reasoning=${reasoning}]`);

/**
 * A chat answer on `model` to a prompt that reads `cached` tokens from the cache: the client sees them as
 * cached_tokens and the rest of the prompt is billed at the input price. The usage and the usage record.
 */
async function chatCacheRead(stream: boolean, model: string, cached: number, reasoning: number) {
  const a = await account();
  const { usage, ...reported } = await chatAnswer(a, stream, chatBody(model, cacheMarkers(cached, reasoning)));
  expect(usage.prompt_tokens_details!.cached_tokens).toBe(cached);
  const cost = expectedCost(model, cacheReadFields(usage.prompt_tokens - cached, cached, usage.completion_tokens));
  return { usage, rec: await expectBilled(a.key, reported, cost) };
}

/** As chatCacheRead, for a response: cached tokens in input_tokens_details. The usage. */
async function responsesCacheRead(stream: boolean, model: string, cached: number, reasoning?: number) {
  const a = await account();
  const { usage, ...reported } = await responsesAnswer(a, stream, model, `hi ${cacheMarkers(cached, reasoning)}`);
  expect(usage.input_tokens_details.cached_tokens).toBe(cached);
  await expectBilled(
    a.key,
    reported,
    expectedCost(model, cacheReadFields(usage.input_tokens - cached, cached, usage.output_tokens)),
  );
  return usage;
}

/** Chat usage of a Claude prompt with CLAUDE_MARKERS: reads and both writes in prompt_tokens_details, priced by TTL. */
async function expectClaudeChatBilled(key: string, model: string, usage: OpenAI.CompletionUsage, reported: Reported) {
  expect(usage.prompt_tokens_details).toEqual({
    cached_tokens: 20000,
    cache_write_tokens: 12000,
    cache_write_1h_tokens: 4000,
  });
  await expectBilled(
    key,
    reported,
    expectedCost(model, claudeCacheFields(usage.prompt_tokens, usage.completion_tokens)),
  );
}

/**
 * Responses usage of a Claude prompt with CLAUDE_MARKERS: the 5-minute / 1-hour split is not in the Responses shape,
 * but it is billed and recorded.
 */
async function expectClaudeResponsesBilled(
  key: string,
  model: string,
  u: OpenAI.Responses.ResponseUsage,
  reported: Reported,
) {
  expect(u.input_tokens_details).toEqual({ cached_tokens: 20000, cache_write_tokens: 12000 });
  const rec = await expectBilled(
    key,
    reported,
    expectedCost(model, claudeCacheFields(u.input_tokens, u.output_tokens)),
  );
  expect(rec.units).toMatchObject({ cache_write_5m_tokens: 8000, cache_write_1h_tokens: 4000 });
}

/** A streamed message answer (up to 1000 tokens): its events and what was reported. */
const streamMessages = async (a: Account, body: object) =>
  sse(await post('/v1/messages', a.headers, { max_tokens: 1000, stream: true, ...body }));

/** Messages streamed on a translated model: message_delta carries 6000 cache reads, priced as such. */
async function expectStreamedMessagesCacheRead(model: string, content: string) {
  const a = await account();
  const s = await streamMessages(a, { model, system: PADDING, messages: [{ role: 'user', content }] });
  const u = s.events.find((e) => e.type === 'message_delta').usage;
  expect(u.cache_read_input_tokens).toBe(6000);
  await expectBilled(a.key, s, expectedCost(model, cacheReadFields(u.input_tokens, 6000, u.output_tokens)));
}

describe('native Anthropic Messages', () => {
  const model = 'claude-sonnet-4-6';
  const system: Anthropic.TextBlockParam[] = [
    { type: 'text', text: PADDING, cache_control: { type: 'ephemeral', ttl: '1h' } },
  ];
  const tools: Anthropic.Tool[] = [
    {
      name: 'lookup',
      description: 'Look up',
      input_schema: { type: 'object', properties: { q: { type: 'string' } } },
      cache_control: { type: 'ephemeral' },
    },
  ];
  const messages: Anthropic.MessageParam[] = [
    {
      role: 'user',
      content: [{ type: 'text', text: `hello ${CLAUDE_MARKERS}`, cache_control: { type: 'ephemeral' } }],
    },
  ];
  const fieldsOf = (u: Anthropic.Usage): Fields => ({
    input: u.input_tokens,
    cacheRead: u.cache_read_input_tokens ?? 0,
    write5m: u.cache_creation!.ephemeral_5m_input_tokens,
    write1h: u.cache_creation!.ephemeral_1h_input_tokens,
    output: u.output_tokens,
  });
  /** The upstream got system, tools and messages with their cache_control as the client sent them. */
  const expectSentUntouched = () => {
    const sent = gw.emulator.control.requests.filter((r) => r.path === '/anthropic/v1/messages').pop()!
      .body as Anthropic.MessageCreateParams;
    expect({ system: sent.system, tools: sent.tools, messages: sent.messages }).toEqual({ system, tools, messages });
  };

  test('plain: cache_control passes through untouched, each usage field is priced on its own', async () => {
    const a = await account();
    const { data: m, response } = await a.anthropic.messages
      .create({ model, max_tokens: 1000, system, tools, tool_choice: { type: 'none' }, messages })
      .withResponse();
    expectSentUntouched();
    expect(m.usage).toMatchObject({
      cache_read_input_tokens: 20000,
      cache_creation_input_tokens: 12000,
      cache_creation: { ephemeral_5m_input_tokens: 8000, ephemeral_1h_input_tokens: 4000 },
    });
    const f = fieldsOf(m.usage);
    const cost = expectedCost(model, f);
    // Billing every prompt token at the input price, cache ignored, would cost a different amount.
    expect(expectedCost(model, { ...f, input: f.input + 32000, cacheRead: 0, write5m: 0, write1h: 0 })).not.toBe(cost);
    const u = await expectBilled(a.key, reportedBy(response), cost);
    expect(u.units).toEqual({
      prompt_tokens: f.input + 32000,
      completion_tokens: f.output,
      input_uncached_tokens: f.input,
      cache_read_tokens: 20000,
      cache_write_5m_tokens: 8000,
      cache_write_1h_tokens: 4000,
    });
    expect(u.tokens).toEqual({
      input_uncached: f.input,
      cache_read: 20000,
      cache_write_5m: 8000,
      cache_write_1h: 4000,
      output: f.output,
      reasoning: 0,
    });
  });

  test('stream: usage from message_start and message_delta, the cost in the closing comment', async () => {
    const a = await account();
    const s = await streamMessages(a, { model, system, tools, tool_choice: { type: 'none' }, messages });
    expectSentUntouched();
    const delta = s.events.find((e) => e.type === 'message_delta');
    const start = s.events.find((e) => e.type === 'message_start');
    expect(start.message.usage).toMatchObject({ cache_read_input_tokens: 20000, cache_creation_input_tokens: 12000 });
    await expectBilled(a.key, s, expectedCost(model, fieldsOf({ ...start.message.usage, ...delta.usage })));
  });
});

describe('chat completions', () => {
  const claude = 'claude-haiku-4-5';

  test('on a Claude model (bridged): cache reads and writes in prompt_tokens_details, priced by TTL', async () => {
    const a = await account();
    const { data: r, response } = await a.openai.chat.completions
      .create(chatBody(claude, CLAUDE_MARKERS))
      .withResponse();
    await expectClaudeChatBilled(a.key, claude, r.usage!, reportedBy(response));
  });

  test('on a Claude model, streamed with include_usage', async () => {
    const a = await account();
    const { usage, ...reported } = await chatAnswer(a, true, chatBody(claude, CLAUDE_MARKERS));
    await expectClaudeChatBilled(a.key, claude, usage, reported);
  });

  test.each([false, true])(
    'on an OpenAI model (native, stream %s): cached_tokens at the cached-input price, reasoning in the output',
    async (stream) => {
      const { usage, rec } = await chatCacheRead(stream, 'o4-mini', 9000, 700);
      expect(usage.completion_tokens_details!.reasoning_tokens).toBe(700);
      expect(rec.units).toMatchObject({
        cache_read_tokens: 9000,
        reasoning_tokens: 700,
        input_uncached_tokens: usage.prompt_tokens - 9000,
      });
    },
  );
});

describe('chat completions on a Responses-only model (bridged)', () => {
  test.each([false, true])('stream %s: cached input and reasoning from the Responses usage', async (stream) => {
    const { usage, rec } = await chatCacheRead(stream, 'gpt-5-codex', 8000, 400);
    expect(usage.completion_tokens_details!.reasoning_tokens).toBeGreaterThanOrEqual(400);
    expect(rec.units).toMatchObject({ cache_read_tokens: 8000, input_uncached_tokens: usage.prompt_tokens - 8000 });
  });
});

describe('messages and responses on other upstreams', () => {
  test('messages on an OpenAI model (translated): cached tokens become cache_read_input_tokens', async () => {
    const model = 'gpt-4o-mini';
    const a = await account();
    const { data: m, response } = await a.anthropic.messages
      .create({
        model,
        max_tokens: 1000,
        system: PADDING,
        messages: [{ role: 'user', content: 'hi [cache_read=6000]' }],
      })
      .withResponse();
    expect(m.usage.cache_read_input_tokens).toBe(6000);
    expect(m.usage.cache_creation_input_tokens).toBe(0);
    const cost = expectedCost(model, cacheReadFields(m.usage.input_tokens, 6000, m.usage.output_tokens));
    await expectBilled(a.key, reportedBy(response), cost);
  });

  test('messages streamed on a Responses-only model (translated): cache reads and reasoning', async () => {
    await expectStreamedMessagesCacheRead('gpt-5-codex', 'hi [cache_read=6000] [reasoning=50]');
  });

  test('responses on a Claude model (bridged): cache reads in input_tokens_details, writes priced', async () => {
    const model = 'claude-opus-4-6';
    const a = await account();
    const { data: r, response } = await a.openai.responses
      .create({ model, instructions: PADDING, input: `hi ${CLAUDE_MARKERS}` })
      .withResponse();
    await expectClaudeResponsesBilled(a.key, model, r.usage!, reportedBy(response));
  });

  test('messages streamed on an OpenAI chat model (translated): cached tokens in start and delta', async () => {
    await expectStreamedMessagesCacheRead('gpt-4o-mini', 'hi [cache_read=6000]');
  });

  test('responses streamed on a Claude model (bridged): cache reads and writes, 1-hour writes priced', async () => {
    const model = 'claude-opus-4-6';
    const a = await account();
    const { usage, ...reported } = await responsesAnswer(a, true, model, `hi ${CLAUDE_MARKERS}`);
    await expectClaudeResponsesBilled(a.key, model, usage, reported);
  });

  test.each([false, true])(
    'responses on an OpenAI chat model (translated, stream %s): cached input at its price',
    async (stream) => {
      await responsesCacheRead(stream, 'gpt-4o-mini', 5000);
    },
  );

  test.each([false, true])(
    'responses on a Responses model (native, stream %s): cached input and reasoning',
    async (stream) => {
      const usage = await responsesCacheRead(stream, 'gpt-5-codex', 7000, 300);
      expect(usage.output_tokens_details.reasoning_tokens).toBeGreaterThanOrEqual(300);
    },
  );
});

test('other billed operations report their cost in headers', async () => {
  const a = await account();
  const res = await post('/v1/embeddings', a.headers, { model: 'text-embedding-3-small', input: 'hello world' });
  expect(res.status).toBe(200);
  await res.arrayBuffer();
  await expectBilled(a.key, reportedBy(res), 1);
});

describe('every billed operation reports its cost in headers, equal to its usage record', () => {
  const fixture = (name: string) => path.join(__dirname, '../../emulator/fixtures', name);
  const ops: [string, (c: OpenAI) => Promise<{ response: Response }>][] = [
    [
      'completions',
      (c) => c.completions.create({ model: 'gpt-3.5-turbo-instruct', prompt: 'hello there' }).withResponse(),
    ],
    [
      'speech',
      async (c) => {
        const { data, response } = await c.audio.speech
          .create({ model: 'tts-1', voice: 'alloy', input: 'hello there' })
          .withResponse();
        await data.arrayBuffer();
        return { response };
      },
    ],
    [
      'transcriptions',
      async (c) =>
        c.audio.transcriptions
          .create({ model: 'whisper-1', file: await toFile(fs.readFileSync(fixture('speech.mp3')), 'speech.mp3') })
          .withResponse(),
    ],
    [
      'image generation',
      (c) => c.images.generate({ model: 'gpt-image-1', prompt: 'a cat', size: '1024x1024' }).withResponse(),
    ],
    [
      'image edits',
      async (c) =>
        c.images
          .edit({
            model: 'gpt-image-1',
            prompt: 'a hat',
            image: await toFile(fs.readFileSync(fixture('last_frame.png')), 'in.png', { type: 'image/png' }),
          })
          .withResponse(),
    ],
  ];
  test.each(ops)('%s', async (_name, call) => {
    const a = await account();
    const { response } = await call(a.openai);
    const reported = Number(response.headers.get('x-gateway-cost-vnd'));
    expect(reported).toBeGreaterThan(0);
    const u = await lastUsage(a.key);
    expect(u.id).toBe(response.headers.get('x-gateway-usage-id'));
    expect(u.cost_vnd).toBe(reported);
    expect(await balance(a.key)).toBe(5_000_000 - reported);
  });
});

test.each([
  [
    'chat on an OpenAI model',
    '/v1/chat/completions',
    {
      model: 'gpt-4o-mini',
      stream: true,
      emulator_cut_after: 3,
      messages: [{ role: 'user', content: 'one two three four five six' }],
    },
  ],
  [
    'chat on a Claude model',
    '/v1/chat/completions',
    {
      model: 'claude-haiku-4-5',
      stream: true,
      messages: [{ role: 'user', content: 'one two three four five six EMULATOR_DROP_MIDSTREAM' }],
    },
  ],
  [
    'messages on a Claude model',
    '/v1/messages',
    {
      model: 'claude-haiku-4-5',
      stream: true,
      max_tokens: 100,
      messages: [{ role: 'user', content: 'one two three four five six EMULATOR_DROP_MIDSTREAM' }],
    },
  ],
])('%s: a stream cut by the upstream still ends with what it was charged', async (_name, path, body) => {
  const a = await account();
  const res = await post(path, a.headers, body);
  const blocks = (await res.text()).split('\n\n').filter((b) => b.trim());
  expect(blocks.some((b) => b.includes('"error"'))).toBe(true);
  expect(blocks.some((b) => b.includes('[DONE]'))).toBe(false);
  const m = /^: x-gateway-cost-vnd=(\d+) x-gateway-usage-id=(\S+)$/.exec(blocks[blocks.length - 1])!;
  expect(m).not.toBeNull();
  const u = await lastUsage(a.key);
  expect(u).toMatchObject({ id: m[2], cost_vnd: Number(m[1]), status: 502, units: { estimated: 1 } });
  expect(u.cost_vnd).toBeGreaterThan(0);
});
