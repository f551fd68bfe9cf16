import { GoogleGenAI } from '@google/genai';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { startGateway, type TestGateway } from '../support/gateway';

/**
 * A provider of kind `gemini`: the emulator's Gemini API checked against the official @google/genai SDK, then
 * gemini-2.5-flash served natively on the Gemini routes (body and answer passed through, billed on usageMetadata)
 * and translated on /v1/chat/completions, /v1/messages and /v1/responses.
 */

let gw: TestGateway;
let key: string;
beforeAll(async () => {
  gw = await startGateway({ logLevel: 'warn' }, { temporal: false });
  ({ key } = await gw.account(5_000_000));
});
afterAll(() => gw.close());
afterEach(() => gw.emulator.control.reset());

const MODEL = 'gemini-2.5-flash';
const weather = {
  name: 'get_weather',
  description: 'Current weather',
  parametersJsonSchema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};
const upstream = () =>
  gw.emulator.control.requests.filter((r) => r.method === 'POST').map((r) => ({ path: r.path, body: r.body as any }));

describe('the emulator, as the official SDK sees it', () => {
  const sdk = () =>
    new GoogleGenAI({ apiKey: 'emu', httpOptions: { baseUrl: `${gw.emulator.url}/gemini`, apiVersion: 'v1beta' } });
  test('generateContent, streaming, function calling, countTokens', async () => {
    const r = await sdk().models.generateContent({
      model: MODEL,
      contents: 'hi',
      config: { thinkingConfig: { includeThoughts: true } },
    });
    expect(r.text).toBe('You said: hi');
    expect(r.candidates![0].content!.parts![0]).toMatchObject({ thought: true });
    expect(r.usageMetadata).toMatchObject({
      promptTokenCount: 1,
      candidatesTokenCount: 3,
      thoughtsTokenCount: expect.any(Number),
    });
    const chunks = [];
    for await (const c of await sdk().models.generateContentStream({ model: MODEL, contents: 'one two three' }))
      chunks.push(c);
    expect(chunks.map((c) => c.text).join('')).toBe('You said: one two three');
    expect(chunks.at(-1)!.candidates![0].finishReason).toBe('STOP');
    const call = await sdk().models.generateContent({
      model: MODEL,
      contents: 'weather?',
      config: { tools: [{ functionDeclarations: [weather] }] },
    });
    expect(call.functionCalls).toEqual([expect.objectContaining({ name: 'get_weather', args: { city: 'example' } })]);
    expect((await sdk().models.countTokens({ model: MODEL, contents: 'count me' })).totalTokens).toBe(2);
  });
});

describe('natively on the Gemini routes', () => {
  const ai = (k = key) => new GoogleGenAI({ apiKey: k, httpOptions: { baseUrl: gw.url } });

  test('the body goes upstream as sent, the answer comes back as produced, billed on usageMetadata', async () => {
    const acct = await gw.account(1_000_000);
    const r = await ai(acct.key).models.generateContent({
      model: MODEL,
      contents: 'hi [cache_read=40]',
      config: { systemInstruction: 'Be brief.', maxOutputTokens: 300 },
    });
    expect(r.text).toBe('You said: hi [cache_read=40]');
    const [call] = upstream();
    expect(call.path).toBe(`/gemini/v1beta/models/${MODEL}:generateContent`);
    expect(call.body).toEqual({
      contents: [{ role: 'user', parts: [{ text: 'hi [cache_read=40]' }] }],
      systemInstruction: { role: 'user', parts: [{ text: 'Be brief.' }] },
      generationConfig: { maxOutputTokens: 300 },
    });
    const u = r.usageMetadata!;
    expect(u.cachedContentTokenCount).toBe(40);
    await gw.deps.credit.flush();
    const rows = (
      await gw.deps.db.query('SELECT units, cost_vnd FROM usage_records WHERE account_id = $1', [acct.accountId])
    ).rows;
    const p = gw.deps.catalog.get(MODEL)!.pricing;
    const expected = Math.ceil(
      ((u.promptTokenCount! - 40) * p.inputPer1MTokens! +
        40 * p.cachedInputPer1MTokens! +
        u.candidatesTokenCount! * p.outputPer1MTokens!) /
        1e6,
    );
    expect(rows).toHaveLength(1);
    expect(Number(rows[0].cost_vnd)).toBe(expected);
    expect(r.sdkHttpResponse!.headers!['x-gateway-cost-vnd']).toBe(String(expected));
  });

  test('streaming and a function round trip', async () => {
    const chunks = [];
    for await (const c of await ai().models.generateContentStream({ model: MODEL, contents: 'one two three' }))
      chunks.push(c);
    expect(chunks.map((c) => c.text).join('')).toBe('You said: one two three');
    expect(upstream()[0].path).toBe(`/gemini/v1beta/models/${MODEL}:streamGenerateContent`);
    const tools = [{ functionDeclarations: [weather] }];
    const first = await ai().models.generateContent({ model: MODEL, contents: 'weather?', config: { tools } });
    const fc = first.functionCalls![0];
    const second = await ai().models.generateContent({
      model: MODEL,
      config: { tools },
      contents: [
        { role: 'user', parts: [{ text: 'weather?' }] },
        first.candidates![0].content!,
        { role: 'user', parts: [{ functionResponse: { id: fc.id, name: fc.name, response: { output: 'rain' } } }] },
      ],
    });
    expect(second.text).toBe('The tool returned: rain');
  });

  test("countTokens is the upstream's; an upstream error keeps its status and Google shape", async () => {
    expect((await ai().models.countTokens({ model: MODEL, contents: 'count me' })).totalTokens).toBe(2);
    gw.emulator.control.addFault({ match: ':generateContent', status: 400, times: 1 });
    await expect(ai().models.generateContent({ model: MODEL, contents: 'x' })).rejects.toMatchObject({ status: 400 });
  });
});

describe('translated on the other interfaces', () => {
  test('chat completions: text, a tool call, a stream', async () => {
    const o = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const c = await o.chat.completions.create({
      model: MODEL,
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'hi' },
      ],
    });
    expect(c.choices[0].message.content).toBe('You said: hi');
    expect(c.usage!.prompt_tokens).toBeGreaterThan(0);
    expect(upstream()[0].body.systemInstruction).toEqual({ parts: [{ text: 'Be brief.' }] });
    const tools = [
      { type: 'function' as const, function: { name: 'get_weather', parameters: weather.parametersJsonSchema } },
    ];
    const t = await o.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'weather?' }],
      tools,
    });
    const tc = t.choices[0].message.tool_calls![0] as { id: string; function: { name: string; arguments: string } };
    expect(t.choices[0].finish_reason).toBe('tool_calls');
    expect(JSON.parse(tc.function.arguments)).toEqual({ city: 'example' });
    const back = await o.chat.completions.create({
      model: MODEL,
      tools,
      messages: [
        { role: 'user', content: 'weather?' },
        t.choices[0].message,
        { role: 'tool', tool_call_id: tc.id, content: 'sunny' },
      ],
    });
    expect(back.choices[0].message.content).toBe('The tool returned: sunny');
    let text = '';
    for await (const ch of await o.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'a b c' }],
      stream: true,
    }))
      text += ch.choices[0]?.delta?.content ?? '';
    expect(text).toBe('You said: a b c');
  });

  test('messages (Anthropic SDK) and responses (OpenAI SDK)', async () => {
    const a = new Anthropic({ apiKey: key, baseURL: gw.url, maxRetries: 0 });
    const m = await a.messages.create({ model: MODEL, max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] });
    expect(m.content).toEqual([{ type: 'text', text: 'You said: hi' }]);
    const s = await a.messages
      .stream({ model: MODEL, max_tokens: 100, messages: [{ role: 'user', content: 'x y' }] })
      .finalMessage();
    expect(s.content).toEqual([{ type: 'text', text: 'You said: x y' }]);
    const o = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const r = await o.responses.create({ model: MODEL, input: 'hi' });
    expect(r.output_text).toBe('You said: hi');
  });
});
