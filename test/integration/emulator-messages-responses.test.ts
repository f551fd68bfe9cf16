import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { startEmulator, type Emulator } from '../../emulator/server';

/** The emulated Anthropic and Responses upstreams speak the wire protocols the official SDKs expect. */

let emu: Emulator;
beforeAll(async () => {
  emu = await startEmulator();
});
afterAll(() => emu.close());

const weather = {
  name: 'get_weather',
  description: 'Weather',
  input_schema: { type: 'object' as const, properties: { city: { type: 'string' } }, required: ['city'] },
};

test('Anthropic emulator: create, stream with a tool call and thinking, count_tokens', async () => {
  const client = new Anthropic({ apiKey: 'k', baseURL: `${emu.url}/anthropic` });
  const m = await client.messages.create({
    model: 'claude-x',
    max_tokens: 100,
    messages: [{ role: 'user', content: 'hello there' }],
  });
  expect(m.content).toEqual([{ type: 'text', text: 'You said: hello there' }]);
  expect(m.stop_reason).toBe('end_turn');

  const stream = client.messages.stream({
    model: 'claude-x',
    max_tokens: 100,
    tools: [weather],
    thinking: { type: 'enabled', budget_tokens: 2000 },
    messages: [{ role: 'user', content: 'weather?' }],
  });
  const final = await stream.finalMessage();
  expect(final.content.map((b) => b.type)).toEqual(['thinking', 'text', 'tool_use']);
  expect(final.content[2]).toMatchObject({ type: 'tool_use', name: 'get_weather', input: { city: 'example' } });
  expect(final.stop_reason).toBe('tool_use');
  expect(final.usage.output_tokens).toBeGreaterThan(0);

  const count = await client.messages.countTokens({
    model: 'claude-x',
    messages: [{ role: 'user', content: 'x'.repeat(40) }],
  });
  expect(count.input_tokens).toBe(10);
});

test('Responses emulator: create with custom tool, stream with a function call', async () => {
  const client = new OpenAI({ apiKey: 'k', baseURL: `${emu.url}/openai/v1` });
  const r = await client.responses.create({ model: 'gpt-x', input: 'hi' });
  expect(r.output_text).toBe('You said: hi');
  expect(r.usage).toMatchObject({
    input_tokens_details: { cached_tokens: 0 },
    output_tokens_details: { reasoning_tokens: 0 },
  });

  const stream = client.responses.stream({
    model: 'gpt-x',
    input: 'run ls',
    reasoning: { effort: 'low' },
    tools: [
      {
        type: 'function',
        name: 'shell',
        strict: false,
        parameters: { type: 'object', properties: { command: { type: 'string' } } },
      },
    ],
  });
  const types: string[] = [];
  for await (const e of stream) types.push(e.type);
  const final = await stream.finalResponse();
  expect(types[0]).toBe('response.created');
  expect(types[types.length - 1]).toBe('response.completed');
  expect(final.output.map((o) => o.type)).toEqual(['reasoning', 'function_call']);
  expect(final.output[1]).toMatchObject({ name: 'shell', arguments: '{"command":"example"}' });

  await expect(
    client.responses.create({ model: 'gpt-x', input: 'x', previous_response_id: 'resp_unknown' }),
  ).rejects.toMatchObject({ status: 404 });
});
