import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { startGateway, type TestGateway } from '../support/gateway';

/**
 * Every chat model of the default catalog on every interface, plain and streamed, with the official SDKs:
 * /v1/chat/completions and /v1/responses (openai) and /v1/messages (@anthropic-ai/sdk), whatever the model's
 * upstream protocol (OpenAI-compatible, Anthropic, Responses-only). Each answer carries the emulator's text and a
 * normal finish, and each request leaves exactly one usage record, charged, whose cost and id the response reported
 * (x-gateway-cost-vnd / x-gateway-usage-id headers, or a stream's closing SSE comment).
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

interface Answer {
  text: string;
  finish: string;
  usageIn: number;
  usageOut: number;
}

async function ask(iface: Interface, model: string, key: string, stream: boolean, prompt: string): Promise<Answer> {
  if (iface === 'messages') {
    const c = new Anthropic({ apiKey: key, baseURL: gw.url, maxRetries: 0 });
    const m = stream
      ? await c.messages
          .stream({ model, max_tokens: 300, messages: [{ role: 'user', content: prompt }] })
          .finalMessage()
      : await c.messages.create({ model, max_tokens: 300, messages: [{ role: 'user', content: prompt }] });
    const text = m.content
      .filter((b): b is Anthropic.TextBlock => b.type === 'text')
      .map((b) => b.text)
      .join('');
    return { text, finish: String(m.stop_reason), usageIn: m.usage.input_tokens, usageOut: m.usage.output_tokens };
  }
  const c = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0 });
  if (iface === 'responses') {
    const r = stream
      ? await c.responses.stream({ model, input: prompt }).finalResponse()
      : await c.responses.create({ model, input: prompt });
    return {
      text: r.output_text,
      finish: String(r.status),
      usageIn: r.usage!.input_tokens,
      usageOut: r.usage!.output_tokens,
    };
  }
  if (!stream) {
    const r = await c.chat.completions.create({ model, messages: [{ role: 'user', content: prompt }] });
    return {
      text: r.choices[0].message.content ?? '',
      finish: String(r.choices[0].finish_reason),
      usageIn: r.usage!.prompt_tokens,
      usageOut: r.usage!.completion_tokens,
    };
  }
  const s = await c.chat.completions.create({
    model,
    messages: [{ role: 'user', content: prompt }],
    stream: true,
    stream_options: { include_usage: true },
  });
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

const normalFinish: Record<Interface, string> = {
  'chat.completions': 'stop',
  messages: 'end_turn',
  responses: 'completed',
};

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

const streamBody: Record<Interface, (model: string) => { path: string; body: unknown }> = {
  'chat.completions': (model) => ({
    path: '/v1/chat/completions',
    body: { model, stream: true, messages: [{ role: 'user', content: 'hi' }] },
  }),
  messages: (model) => ({
    path: '/v1/messages',
    body: { model, stream: true, max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] },
  }),
  responses: (model) => ({ path: '/v1/responses', body: { model, stream: true, input: 'hi' } }),
};

test('every response reports its cost: the header of a plain answer, the closing SSE comment of a stream', async () => {
  const failures: string[] = [];
  for (const model of chatModels()) {
    for (const iface of interfaces) {
      for (const stream of [false, true]) {
        const label = `${model} ${iface} ${stream ? 'stream' : 'plain'}`;
        const { key } = await gw.account(5_000_000);
        const { path, body } = streamBody[iface](model);
        try {
          const res = await fetch(`${gw.url}${path}`, {
            method: 'POST',
            headers: {
              authorization: `Bearer ${key}`,
              'content-type': 'application/json',
              'anthropic-version': '2023-06-01',
            },
            body: JSON.stringify({ ...(body as object), stream }),
          });
          expect(res.status).toBe(200);
          const text = await res.text();
          let reported: { cost: number; id: string };
          if (stream) {
            const comments = text.split('\n\n').filter((b) => b.startsWith(':'));
            expect(comments).toHaveLength(1);
            const m = /^: x-gateway-cost-vnd=(\d+) x-gateway-usage-id=(\S+)$/.exec(comments[0])!;
            reported = { cost: Number(m[1]), id: m[2] };
          } else {
            reported = {
              cost: Number(res.headers.get('x-gateway-cost-vnd')),
              id: res.headers.get('x-gateway-usage-id')!,
            };
          }
          const rows = (
            (await (await fetch(`${gw.url}/v1/usage`, { headers: { authorization: `Bearer ${key}` } })).json()) as {
              data: any[];
            }
          ).data;
          expect(rows).toHaveLength(1);
          expect(reported).toEqual({ cost: rows[0].cost_vnd, id: rows[0].id });
          expect(reported.cost).toBeGreaterThan(0);
        } catch (e) {
          failures.push(`${label}: ${(e as Error).message.split('\n').slice(0, 6).join(' ')}`);
        }
      }
    }
  }
  expect(failures).toEqual([]);
});
