import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { startGateway, type TestGateway } from '../support/gateway';

/**
 * /v1/chat/completions on chat models whose upstream does not speak Chat Completions, with the official openai SDK:
 * a Claude model (chat <-> Anthropic Messages bridge) and a Responses-only model (chat <-> Responses bridge). Tools
 * and tool calls, images, stop, JSON mode and stream_options.include_usage behave as on an OpenAI model; what the
 * bridge cannot honour is a 400 naming the field.
 */

let gw: TestGateway;
let client: OpenAI;
beforeAll(async () => {
  gw = await startGateway({ logLevel: 'warn' }, { temporal: false });
  const { key } = await gw.account(5_000_000);
  client = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0 });
});
afterAll(() => gw.close());
afterEach(() => gw.emulator.control.reset());

const CLAUDE = 'claude-haiku-4-5';
const RESPONSES_ONLY = 'gpt-5-codex';
const weather: OpenAI.ChatCompletionTool = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
};
const sentTo = (path: string) => gw.emulator.control.requests.filter((r) => r.path === path).pop()!.body as any;
const upstreamPath = (model: string) => (model === CLAUDE ? '/anthropic/v1/messages' : '/openai/v1/responses');

/** Reads a streamed completion the way SDK users do: text, tool calls by index, finish reason, usage chunk. */
async function collect(stream: AsyncIterable<OpenAI.ChatCompletionChunk>) {
  let text = '';
  let finish: string | null = null;
  let usage: OpenAI.CompletionUsage | null = null;
  let usageChunkHadChoices = true;
  const calls: { id?: string; name: string; args: string }[] = [];
  for await (const c of stream) {
    if (c.usage) {
      usage = c.usage;
      usageChunkHadChoices = c.choices.length > 0;
    }
    for (const ch of c.choices) {
      text += ch.delta.content ?? '';
      for (const tc of ch.delta.tool_calls ?? []) {
        calls[tc.index] ??= { name: '', args: '' };
        if (tc.id) calls[tc.index].id = tc.id;
        calls[tc.index].name += tc.function?.name ?? '';
        calls[tc.index].args += tc.function?.arguments ?? '';
      }
      if (ch.finish_reason) finish = ch.finish_reason;
    }
  }
  return { text, finish, usage, usageChunkHadChoices, calls };
}

describe.each([CLAUDE, RESPONSES_ONLY])('%s', (model) => {
  test('a tool call, then the tool result, plain', async () => {
    const first = await client.chat.completions.create({
      model,
      messages: [{ role: 'user', content: 'weather in Hanoi?' }],
      tools: [weather],
      tool_choice: 'auto',
    });
    const msg = first.choices[0].message;
    expect(first.choices[0].finish_reason).toBe('tool_calls');
    expect(msg.tool_calls).toHaveLength(1);
    const call = msg.tool_calls![0] as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(call.function.name).toBe('get_weather');
    expect(JSON.parse(call.function.arguments)).toEqual({ city: 'example' });
    const second = await client.chat.completions.create({
      model,
      tools: [weather],
      messages: [
        { role: 'user', content: 'weather in Hanoi?' },
        msg,
        { role: 'tool', tool_call_id: call.id, content: '31C and humid' },
      ],
    });
    expect(second.choices[0].message.content).toBe('The tool returned: 31C and humid');
    expect(second.choices[0].finish_reason).toBe('stop');
  });

  test('a tool call streamed, with the usage chunk asked for', async () => {
    const s = await client.chat.completions.create({
      model,
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: 'user', content: 'weather?' }],
      tools: [weather],
    });
    const r = await collect(s);
    expect(r.finish).toBe('tool_calls');
    expect(r.calls.map((c) => c.name)).toEqual(['get_weather']);
    expect(JSON.parse(r.calls[0].args)).toEqual({ city: 'example' });
    expect(r.calls[0].id).toBeTruthy();
    expect(r.usage!.prompt_tokens).toBeGreaterThan(0);
    expect(r.usageChunkHadChoices).toBe(false);
  });

  test('no usage chunk unless include_usage is asked for', async () => {
    const r = await collect(
      await client.chat.completions.create({ model, stream: true, messages: [{ role: 'user', content: 'hello' }] }),
    );
    expect(r.text).toBe('You said: hello');
    expect(r.finish).toBe('stop');
    expect(r.usage).toBeNull();
  });

  test("an image part reaches the upstream as that protocol's image", async () => {
    const png = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';
    const r = await client.chat.completions.create({
      model,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'what is this' },
            { type: 'image_url', image_url: { url: `data:image/png;base64,${png}` } },
          ],
        },
      ],
    });
    expect(r.choices[0].message.content).toContain('what is this');
    const body = sentTo(upstreamPath(model));
    if (model === CLAUDE)
      expect(body.messages[0].content).toContainEqual({
        type: 'image',
        source: { type: 'base64', media_type: 'image/png', data: png },
      });
    else
      expect(body.input[0].content).toContainEqual(
        expect.objectContaining({ type: 'input_image', image_url: `data:image/png;base64,${png}` }),
      );
  });

  test('JSON mode: the answer is a JSON object', async () => {
    const r = await client.chat.completions.create({
      model,
      response_format: { type: 'json_object' },
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(JSON.parse(r.choices[0].message.content!)).toEqual({ reply: 'You said: hi' });
  });

  test('JSON mode streamed: the concatenated deltas are a JSON object', async () => {
    const r = await collect(
      await client.chat.completions.create({
        model,
        stream: true,
        response_format: { type: 'json_object' },
        messages: [{ role: 'user', content: 'hi' }],
      }),
    );
    expect(JSON.parse(r.text)).toEqual({ reply: 'You said: hi' });
    expect(r.finish).toBe('stop');
  });
});

test('stop sequences streamed on a Claude upstream end the answer there', async () => {
  const r = await collect(
    await client.chat.completions.create({
      model: CLAUDE,
      stream: true,
      stop: ['said'],
      messages: [{ role: 'user', content: 'hello' }],
    }),
  );
  expect(sentTo('/anthropic/v1/messages').stop_sequences).toEqual(['said']);
  expect(r.text).toBe('You ');
  expect(r.finish).toBe('stop');
});

test('stop on a Responses-only model is a 400 naming it, on chat and messages; nothing sent or held', async () => {
  const { key } = await gw.account(1_000_000);
  const c = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0 });
  const before = gw.emulator.control.requests.length;
  for (const stream of [false, true]) {
    const err = await c.chat.completions
      .create({ model: RESPONSES_ONLY, stream, stop: 'x', messages: [{ role: 'user', content: 'hi' }] } as never)
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('stop');
    expect((err as InstanceType<typeof OpenAI.BadRequestError>).code).toBe('unsupported_parameter');
  }
  const anthropic = new Anthropic({ apiKey: key, baseURL: gw.url, maxRetries: 0 });
  const err = await anthropic.messages
    .create({
      model: RESPONSES_ONLY,
      max_tokens: 50,
      stop_sequences: ['x'],
      messages: [{ role: 'user', content: 'hi' }],
    })
    .then(
      () => null,
      (e: unknown) => e,
    );
  expect(err).toBeInstanceOf(Anthropic.BadRequestError);
  expect((err as Error).message).toContain('stop_sequences');
  expect(gw.emulator.control.requests.length).toBe(before);
  await new Promise((r) => setTimeout(r, 200)); // past a credit flush
  const acct: any = await (await fetch(`${gw.url}/v1/account`, { headers: { authorization: `Bearer ${key}` } })).json();
  expect(acct.balance_vnd).toBe(1_000_000);
});

test('history parts: a developer message becomes the system prompt, an assistant refusal part is text', async () => {
  const r = await client.chat.completions.create({
    model: CLAUDE,
    messages: [
      { role: 'developer', content: 'be brief' },
      { role: 'user', content: 'first' },
      { role: 'assistant', content: [{ type: 'refusal', refusal: 'I cannot.' }] },
      { role: 'user', content: 'second' },
    ],
  });
  expect(r.choices[0].message.content).toBe('You said: second');
  const sent = sentTo('/anthropic/v1/messages');
  expect(sent.system).toBe('be brief');
  expect(sent.messages[1]).toEqual({ role: 'assistant', content: [{ type: 'text', text: 'I cannot.' }] });
});

test('cache_control on chat parts reaches a Claude upstream as cache breakpoints on its blocks', async () => {
  const cc = { type: 'ephemeral', ttl: '1h' };
  await client.chat.completions.create({
    model: CLAUDE,
    messages: [
      { role: 'system', content: [{ type: 'text', text: 'long instructions', cache_control: cc }] as never },
      { role: 'user', content: [{ type: 'text', text: 'question', cache_control: { type: 'ephemeral' } }] as never },
    ],
  });
  const sent = sentTo('/anthropic/v1/messages');
  expect(sent.system).toEqual([{ type: 'text', text: 'long instructions', cache_control: cc }]);
  expect(sent.messages[0].content).toEqual([{ type: 'text', text: 'question', cache_control: { type: 'ephemeral' } }]);
  // Without breakpoints the system prompt stays one string.
  await client.chat.completions.create({
    model: CLAUDE,
    messages: [
      { role: 'system', content: 'short' },
      { role: 'user', content: 'q' },
    ],
  });
  expect(sentTo('/anthropic/v1/messages').system).toBe('short');
});

test('stop sequences reach a Claude upstream as stop_sequences and end the answer', async () => {
  const r = await client.chat.completions.create({
    model: CLAUDE,
    stop: 'said',
    messages: [{ role: 'user', content: 'hello' }],
  });
  expect(sentTo('/anthropic/v1/messages').stop_sequences).toEqual(['said']);
  expect(r.choices[0].message.content).toBe('You ');
  expect(r.choices[0].finish_reason).toBe('stop');
});

test('what a bridge cannot honour is a 400 naming the field, with nothing sent upstream', async () => {
  const before = gw.emulator.control.requests.length;
  const cases: [Record<string, unknown>, string][] = [
    [{ n: 2 }, 'n'],
    [{ logprobs: true }, 'logprobs'],
    [
      {
        messages: [{ role: 'user', content: [{ type: 'input_audio', input_audio: { data: 'AAAA', format: 'wav' } }] }],
      },
      'messages[0].content[0].type',
    ],
    [{ tools: [{ type: 'custom', custom: { name: 'x' } }] }, 'tools[0].type'],
    [{ messages: [{ role: 'tool', content: 'x' }] }, 'messages[0].tool_call_id'],
  ];
  for (const [extra, param] of cases) {
    const err = await client.chat.completions
      .create({ model: CLAUDE, messages: [{ role: 'user', content: 'hi' }], ...extra } as never)
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as InstanceType<typeof OpenAI.BadRequestError>).param).toBe(param);
  }
  expect(gw.emulator.control.requests.length).toBe(before);
});
