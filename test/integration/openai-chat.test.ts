import OpenAI from 'openai';
import { startGateway, type TestGateway } from '../support/gateway';
import { openaiEmulatorStats } from '../../emulator/openai';
import { usageRows as usageRowsOf } from '../support/records';

/** Chat and legacy completions through the real gateway with the official openai SDK, against the emulator. */

let gw: TestGateway;
let client: OpenAI;
let accountId: string;

beforeAll(async () => {
  gw = await startGateway({ logLevel: 'warn' }, { temporal: false });
});
afterAll(() => gw.close());
// A fresh account per test: usage rows written in one batch share created_at, so tests must not share accounts.
beforeEach(async () => {
  gw.emulator.control.reset();
  const acc = await gw.account(5_000_000);
  accountId = acc.accountId;
  client = new OpenAI({ apiKey: acc.key, baseURL: gw.url + '/v1', maxRetries: 0 });
});

const lastUpstream = () => {
  const reqs = gw.emulator.control.requests;
  return reqs[reqs.length - 1] as { path: string; body: Record<string, any>; headers: Record<string, unknown> };
};

const usageRows = () => usageRowsOf(gw.deps, accountId);

test('chat completion (non-streaming): OpenAI shape, upstream model name, usage billed', async () => {
  const res = await client.chat.completions.create({
    model: 'gpt-4o-mini',
    messages: [{ role: 'user', content: 'Hello there' }],
    temperature: 0.5,
  });
  expect(res.object).toBe('chat.completion');
  expect(typeof res.id).toBe('string');
  expect(res.choices[0]).toMatchObject({
    index: 0,
    message: { role: 'assistant', content: 'You said: Hello there' },
    finish_reason: 'stop',
  });
  expect(res.usage).toEqual(expect.objectContaining({ prompt_tokens: 3, completion_tokens: 6, total_tokens: 9 }));
  const up = lastUpstream();
  expect(up.path).toBe('/openai/v1/chat/completions');
  expect(up.body).toMatchObject({ model: 'gpt-4o-mini', temperature: 0.5 });
  expect(up.body.stream_options).toBeUndefined();
  const [row] = await usageRows();
  expect(row).toMatchObject({
    model: 'gpt-4o-mini',
    operation: 'chat.completions',
    status: 200,
    units: { prompt_tokens: 3, completion_tokens: 6 },
  });
  // ceil((3 * 3900 + 6 * 15600) / 1e6) = 1 VND
  expect(Number(row.cost_vnd)).toBe(1);
});

test('tools, stop, response_format, top_p, max_tokens and unknown fields pass through', async () => {
  const tools = [
    {
      type: 'function' as const,
      function: {
        name: 'get_weather',
        parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
      },
    },
  ];
  const res = await client.chat.completions.create({
    model: 'gpt-4o-mini',
    messages: [{ role: 'user', content: 'Weather in Hanoi?' }],
    tools,
    top_p: 0.9,
  });
  expect(res.choices[0].finish_reason).toBe('tool_calls');
  const call = res.choices[0].message.tool_calls![0];
  expect(call.type).toBe('function');
  expect(call.type === 'function' && call.function.name).toBe('get_weather');
  expect(call.type === 'function' && JSON.parse(call.function.arguments)).toEqual({ city: 'example' });
  expect(lastUpstream().body).toMatchObject({ tools, top_p: 0.9 });

  const stopped = await client.chat.completions.create({
    model: 'gpt-4o-mini',
    messages: [{ role: 'user', content: 'one two three' }],
    stop: [' two'],
  });
  expect(stopped.choices[0].message.content).toBe('You said: one');
  expect(lastUpstream().body.stop).toEqual([' two']);

  const cut = await client.chat.completions.create({
    model: 'gpt-4o-mini',
    messages: [{ role: 'user', content: 'a long enough message here' }],
    max_tokens: 2,
  });
  expect(cut.choices[0].finish_reason).toBe('length');
  expect(cut.usage!.completion_tokens).toBe(2);

  const js = await client.chat.completions.create({
    model: 'gpt-4o-mini',
    messages: [{ role: 'user', content: 'hi' }],
    response_format: { type: 'json_object' },
    seed: 7,
    ...({ custom_vendor_field: { a: 1 } } as object),
  });
  expect(JSON.parse(js.choices[0].message.content!)).toEqual({ reply: 'You said: hi' });
  expect(lastUpstream().body).toMatchObject({
    response_format: { type: 'json_object' },
    seed: 7,
    custom_vendor_field: { a: 1 },
  });
});

test('streaming chat: chunks then [DONE]; the usage chunk is stripped unless asked for, always billed', async () => {
  const stream = await client.chat.completions.create({
    model: 'gpt-4o-mini',
    messages: [{ role: 'user', content: 'stream me please' }],
    stream: true,
  });
  let text = '';
  const chunks: any[] = [];
  for await (const c of stream) {
    chunks.push(c);
    text += c.choices[0]?.delta?.content ?? '';
  }
  expect(text).toBe('You said: stream me please');
  expect(chunks.every((c) => c.object === 'chat.completion.chunk' && c.choices.length === 1)).toBe(true);
  expect(chunks[chunks.length - 1].choices[0].finish_reason).toBe('stop');
  expect(chunks.some((c) => c.usage)).toBe(false);
  // The gateway asked the upstream for usage anyway.
  expect(lastUpstream().body.stream_options).toEqual({ include_usage: true });
  const [row] = await usageRows();
  expect(row).toMatchObject({
    operation: 'chat.completions',
    status: 200,
    units: { prompt_tokens: 4, completion_tokens: 7 },
  });
  expect(row.units.estimated).toBeUndefined();
  expect(Number(row.cost_vnd)).toBeGreaterThan(0);
  expect(await usageRows()).toHaveLength(1);

  const withUsage = await client.chat.completions.create({
    model: 'gpt-4o-mini',
    messages: [{ role: 'user', content: 'stream me please' }],
    stream: true,
    stream_options: { include_usage: true },
  });
  const all: any[] = [];
  for await (const c of withUsage) all.push(c);
  const last = all[all.length - 1];
  expect(last.choices).toEqual([]);
  expect(last.usage).toMatchObject({ prompt_tokens: 4, completion_tokens: 7, total_tokens: 11 });
});

test('raw SSE: events arrive as data lines ending with data: [DONE]', async () => {
  const acc = await gw.account(100_000);
  const res = await fetch(gw.url + '/v1/chat/completions', {
    method: 'POST',
    headers: { authorization: `Bearer ${acc.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], stream: true }),
  });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
  const body = await res.text();
  const events = body.split('\n\n').filter(Boolean);
  expect(events[events.length - 1]).toBe('data: [DONE]');
  // The cost of the request, as an SSE comment (ignored by SSE clients) just before the end.
  expect(events[events.length - 2]).toMatch(/^: x-gateway-cost-vnd=[1-9]\d* x-gateway-usage-id=[0-9a-f-]{36}$/);
  expect(events.slice(0, -2).every((e) => e.startsWith('data: {'))).toBe(true);
});

test('chunks are forwarded as they arrive: the first delta reaches the client before the upstream ends', async () => {
  gw.emulator.control.settings.chunkDelayMs = 80;
  const stats = openaiEmulatorStats(gw.emulator.control);
  const completedBefore = stats.streamsCompleted;
  const stream = await client.chat.completions.create({
    model: 'gpt-4o-mini',
    messages: [{ role: 'user', content: 'one two three four' }],
    stream: true,
  });
  let completedAtFirstDelta: number | null = null;
  let text = '';
  for await (const c of stream) {
    const d = c.choices[0]?.delta?.content;
    if (d && completedAtFirstDelta === null) completedAtFirstDelta = stats.streamsCompleted;
    text += d ?? '';
  }
  expect(text).toBe('You said: one two three four');
  expect(completedAtFirstDelta).toBe(completedBefore); // upstream still streaming when the client had its first delta
  expect(stats.streamsCompleted).toBe(completedBefore + 1);
});

test('streamed tool calls arrive as fragments keyed by index', async () => {
  const stream = await client.chat.completions.create({
    model: 'gpt-4o-mini',
    messages: [{ role: 'user', content: 'weather?' }],
    stream: true,
    tools: [
      {
        type: 'function',
        function: { name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } },
      },
    ],
  });
  let args = '';
  let name = '';
  let finish: string | null = null;
  for await (const c of stream) {
    const tc = c.choices[0]?.delta?.tool_calls?.[0];
    if (tc?.function?.name) name = tc.function.name;
    if (tc?.function?.arguments) args += tc.function.arguments;
    finish = c.choices[0]?.finish_reason ?? finish;
  }
  expect(name).toBe('lookup');
  expect(JSON.parse(args)).toEqual({ q: 'example' });
  expect(finish).toBe('tool_calls');
});

test('legacy completions: JSON and streaming', async () => {
  const res = await client.completions.create({
    model: 'gpt-3.5-turbo-instruct',
    prompt: 'Once upon a time',
    max_tokens: 50,
  });
  expect(res).toMatchObject({ object: 'text_completion', model: 'gpt-3.5-turbo-instruct' });
  expect(typeof res.created).toBe('number');
  expect(res.choices[0]).toMatchObject({
    index: 0,
    text: ' and then the story continues: Once upon a time',
    finish_reason: 'stop',
  });
  expect(res.usage).toEqual({ prompt_tokens: 4, completion_tokens: 12, total_tokens: 16 });

  const stream = await client.completions.create({
    model: 'gpt-3.5-turbo-instruct',
    prompt: 'Once',
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let usage: any = null;
  for await (const c of stream) {
    text += c.choices[0]?.text ?? '';
    if (c.usage) usage = c.usage;
  }
  expect(text).toBe(' and then the story continues: Once');
  expect(usage).toMatchObject({ prompt_tokens: 1, completion_tokens: 9 });
  const rows = await usageRows();
  expect(rows).toHaveLength(2);
  expect(rows).toEqual(
    expect.arrayContaining([
      expect.objectContaining({
        operation: 'completions',
        status: 200,
        units: { prompt_tokens: 4, completion_tokens: 12 },
      }),
      expect.objectContaining({
        operation: 'completions',
        status: 200,
        units: { prompt_tokens: 1, completion_tokens: 9 },
      }),
    ]),
  );
});

describe('bad input', () => {
  const expectError = async (p: Promise<unknown>, status: number, param: string | null, code?: string) => {
    const e = await p.then(
      () => null,
      (err) => err,
    );
    expect(e).toBeInstanceOf(OpenAI.APIError);
    expect(e.status).toBe(status);
    expect(e.error).toMatchObject({ param, ...(code ? { code } : {}) });
    return e;
  };

  test('validation errors name the parameter; nothing reaches the upstream', async () => {
    await expectError(
      client.chat.completions.create({
        model: 'gpt-4o-mini',
        messages: [{ role: 'user', content: 'x' }],
        temperature: 3,
      }),
      400,
      'temperature',
      'invalid_value',
    );
    await expectError(
      client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'x' }], top_p: 1.5 }),
      400,
      'top_p',
    );
    await expectError(client.chat.completions.create({ model: 'gpt-4o-mini', messages: [] }), 400, 'messages');
    await expectError(
      client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'wizard', content: 'x' } as any] }),
      400,
      'messages[0].role',
    );
    await expectError(
      client.chat.completions.create({ model: 'gpt-4o-mini' } as any),
      400,
      'messages',
      'missing_required_parameter',
    );
    await expectError(
      client.chat.completions.create({
        model: 'gpt-4o-mini',
        messages: [{ role: 'user', content: 'x' }],
        max_tokens: 1_000_000,
      }),
      400,
      'max_tokens',
    );
    await expectError(
      client.completions.create({ model: 'gpt-3.5-turbo-instruct', prompt: 'x', temperature: -1 }),
      400,
      'temperature',
    );
    await expectError(client.completions.create({ model: 'gpt-3.5-turbo-instruct' } as any), 400, 'prompt');
    expect(gw.emulator.control.requests).toHaveLength(0);
  });

  test('unknown model is 404 model_not_found; a model of another mode is 400 on model', async () => {
    await expectError(
      client.chat.completions.create({ model: 'no-such-model', messages: [{ role: 'user', content: 'x' }] }),
      404,
      'model',
      'model_not_found',
    );
    await expectError(
      client.chat.completions.create({ model: 'text-embedding-3-small', messages: [{ role: 'user', content: 'x' }] }),
      400,
      'model',
    );
    await expectError(client.completions.create({ model: 'gpt-4o-mini', prompt: 'x' }), 400, 'model');
    expect(gw.emulator.control.requests).toHaveLength(0);
  });

  test('invalid JSON is 400 and a non-JSON content type is 415', async () => {
    const acc = await gw.account(1000);
    const bad = await fetch(gw.url + '/v1/chat/completions', {
      method: 'POST',
      headers: { authorization: `Bearer ${acc.key}`, 'content-type': 'application/json' },
      body: '{"model": "gpt-4o-mini", "messages": [',
    });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as any).error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_json' });
    const text = await fetch(gw.url + '/v1/chat/completions', {
      method: 'POST',
      headers: { authorization: `Bearer ${acc.key}`, 'content-type': 'text/plain' },
      body: 'hello',
    });
    expect(text.status).toBe(415);
    expect(((await text.json()) as any).error.code).toBe('unsupported_media_type');
  });

  test('an upstream 4xx passes through with its status and message', async () => {
    gw.emulator.control.addFault({ match: 'POST /openai/v1/chat/completions', status: 429, times: 1 });
    const e = await expectError(
      client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'x' }] }),
      429,
      null,
      'emulated_429',
    );
    expect(e.error.message).toBe('emulated failure 429');
  });
});

test('a client disconnecting mid-stream aborts the upstream request and is billed for what was delivered', async () => {
  gw.emulator.control.settings.chunkDelayMs = 40;
  const stats = openaiEmulatorStats(gw.emulator.control);
  const before = { ...stats };
  const ac = new AbortController();
  const words = Array.from({ length: 200 }, (_, i) => `word${i}`).join(' ');
  const stream = await client.chat.completions.create(
    { model: 'gpt-4o-mini', messages: [{ role: 'user', content: words }], stream: true },
    { signal: ac.signal },
  );
  let received = '';
  let n = 0;
  // The SDK ends the iteration quietly (or throws an abort error) once aborted.
  await (async () => {
    for await (const c of stream) {
      received += c.choices[0]?.delta?.content ?? '';
      if (++n === 5) ac.abort();
    }
  })().catch(() => undefined);
  // The emulator sees its connection closed before the stream finished.
  for (let i = 0; i < 100 && stats.streamsAborted === before.streamsAborted; i++)
    await new Promise((r) => setTimeout(r, 20));
  expect(stats.streamsAborted).toBe(before.streamsAborted + 1);
  expect(stats.streamsCompleted).toBe(before.streamsCompleted);
  let row: any;
  for (let i = 0; i < 50; i++) {
    [row] = await usageRows();
    if (row.status === 499) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  expect(row).toMatchObject({ operation: 'chat.completions', status: 499, units: { estimated: 1 } });
  expect(row.units.completion_tokens).toBeGreaterThan(0);
  expect(row.units.completion_tokens).toBeLessThan(100);
  expect(row.units.prompt_tokens).toBeGreaterThan(0);
  expect(Number(row.cost_vnd)).toBeGreaterThan(0);
  expect(received.length).toBeGreaterThan(0);
});

test('a stream cut by the upstream ends with an error for the client, billed for what was delivered', async () => {
  const stream = await client.chat.completions.create({
    model: 'gpt-4o-mini',
    messages: [{ role: 'user', content: 'one two three four five six' }],
    stream: true,
    ...({ emulator_cut_after: 4 } as object),
  });
  let received = '';
  const err = await (async () => {
    for await (const c of stream) received += c.choices[0]?.delta?.content ?? '';
  })().then(
    () => null,
    (e) => e,
  );
  expect(err).toBeInstanceOf(OpenAI.APIError);
  expect(received).toBe('You said: one');
  const [row] = await usageRows();
  expect(row).toMatchObject({
    status: 502,
    units: { estimated: 1, completion_tokens: Math.ceil('You said: one'.length / 4) },
  });
  expect(Number(row.cost_vnd)).toBeGreaterThan(0);
});
