import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { startGateway, type TestGateway } from '../support/gateway';

/**
 * Every chat model of the default catalog on every interface, plain and streamed, with the official SDKs:
 * /v1/chat/completions and /v1/responses (openai) and /v1/messages (@anthropic-ai/sdk), whatever the model's
 * upstream protocol (OpenAI-compatible, Anthropic, Responses-only). Each answer carries the emulator's text and a
 * normal finish, and each request leaves exactly one usage record, charged, with the cost the response reported.
 */

let gw: TestGateway;
beforeAll(async () => {
  gw = await startGateway({ logLevel: 'warn' }, { temporal: false });
});
afterAll(() => gw.close());

const chatModels = (): string[] => {
  // Read from the catalog the gateway loaded (config/catalog.json), so a model added there is covered here.
  const ids = gw.deps.catalog.models.filter((m) => m.mode === 'chat').map((m) => m.id);
  expect(ids.length).toBeGreaterThanOrEqual(7);
  return ids;
};

type Interface = 'chat.completions' | 'messages' | 'responses';
const interfaces: Interface[] = ['chat.completions', 'messages', 'responses'];

interface Answer { text: string; finish: string; usageIn: number; usageOut: number }

async function ask(iface: Interface, model: string, key: string, stream: boolean, prompt: string): Promise<Answer> {
  if (iface === 'messages') {
    const c = new Anthropic({ apiKey: key, baseURL: gw.url, maxRetries: 0 });
    const m = stream
      ? await c.messages.stream({ model, max_tokens: 300, messages: [{ role: 'user', content: prompt }] }).finalMessage()
      : await c.messages.create({ model, max_tokens: 300, messages: [{ role: 'user', content: prompt }] });
    const text = m.content.filter((b): b is Anthropic.TextBlock => b.type === 'text').map((b) => b.text).join('');
    return { text, finish: String(m.stop_reason), usageIn: m.usage.input_tokens, usageOut: m.usage.output_tokens };
  }
  const c = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0 });
  if (iface === 'responses') {
    const r = stream
      ? await c.responses.stream({ model, input: prompt }).finalResponse()
      : await c.responses.create({ model, input: prompt });
    return { text: r.output_text, finish: String(r.status), usageIn: r.usage!.input_tokens, usageOut: r.usage!.output_tokens };
  }
  if (!stream) {
    const r = await c.chat.completions.create({ model, messages: [{ role: 'user', content: prompt }] });
    return { text: r.choices[0].message.content ?? '', finish: String(r.choices[0].finish_reason), usageIn: r.usage!.prompt_tokens, usageOut: r.usage!.completion_tokens };
  }
  const s = await c.chat.completions.create({ model, messages: [{ role: 'user', content: prompt }], stream: true, stream_options: { include_usage: true } });
  let text = '';
  let finish = '';
  let usage: OpenAI.CompletionUsage | undefined;
  for await (const chunk of s) {
    for (const ch of chunk.choices) {
      text += ch.delta.content ?? '';
      if (ch.finish_reason) finish = ch.finish_reason;
    }
    if (chunk.usage) usage = chunk.usage;
  }
  return { text, finish, usageIn: usage!.prompt_tokens, usageOut: usage!.completion_tokens };
}

const normalFinish: Record<Interface, string> = { 'chat.completions': 'stop', messages: 'end_turn', responses: 'completed' };

test('every chat model answers on every interface, plain and streamed, and each request is billed once', async () => {
  const failures: string[] = [];
  let cases = 0;
  for (const model of chatModels()) {
    for (const iface of interfaces) {
      for (const stream of [false, true]) {
        cases++;
        const label = `${model} ${iface} ${stream ? 'stream' : 'plain'}`;
        const { key } = await gw.account(5_000_000);
        const prompt = `matrix ${label}`;
        try {
          const a = await ask(iface, model, key, stream, prompt);
          expect(a.text).toBe(`You said: ${prompt}`);
          expect(a.finish).toBe(normalFinish[iface]);
          expect(a.usageIn).toBeGreaterThan(0);
          expect(a.usageOut).toBeGreaterThan(0);
          const res = await fetch(`${gw.url}/v1/usage`, { headers: { authorization: `Bearer ${key}` } });
          const rows = ((await res.json()) as { data: any[] }).data;
          expect(rows).toHaveLength(1);
          expect(rows[0]).toMatchObject({ model, operation: iface, status: 200 });
          expect(rows[0].cost_vnd).toBeGreaterThan(0);
          expect(rows[0].units.estimated).toBeUndefined();
        } catch (e) {
          failures.push(`${label}: ${(e as Error).message.split('\n').slice(0, 6).join(' ')}`);
        }
      }
    }
  }
  expect(failures).toEqual([]);
  expect(cases).toBe(chatModels().length * 6);
});
