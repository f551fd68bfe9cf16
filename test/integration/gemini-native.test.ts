import { GoogleGenAI } from '@google/genai';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { startGateway, type TestGateway } from '../support/gateway';
import { tokensCost, tokensFromChars } from '../../src/billing/pricing';

/**
 * A provider of kind `gemini`: the emulator's Gemini API checked against the official @google/genai SDK, then
 * gemini-2.5-flash served natively on the Gemini routes (body and answer passed through, billed on usageMetadata)
 * and translated on /v1/chat/completions, /v1/messages and /v1/responses; gemini-embedding-001 natively on
 * embedContent / batchEmbedContents and translated on /v1/embeddings.
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
const EMBED = 'gemini-embedding-001';
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

  test('embedContent (the SDK sends batchEmbedContents) and a single :embedContent', async () => {
    const r = await sdk().models.embedContent({
      model: EMBED,
      contents: ['first text', 'second text'],
      config: { outputDimensionality: 8, taskType: 'RETRIEVAL_DOCUMENT' },
    });
    const [a, b] = r.embeddings!.map((e) => e.values!);
    expect([a.length, b.length]).toEqual([8, 8]);
    expect(a).not.toEqual(b);
    expect(Math.hypot(...a)).toBeCloseTo(1, 5);
    expect((await sdk().models.embedContent({ model: EMBED, contents: 'x' })).embeddings![0].values).toHaveLength(3072);
    const one = await fetch(`${gw.emulator.url}/gemini/v1beta/models/${EMBED}:embedContent`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-goog-api-key': 'emu' },
      body: JSON.stringify({ content: { parts: [{ text: 'first text' }] }, outputDimensionality: 8 }),
    });
    expect(((await one.json()) as any).embedding.values).toEqual(a);
    await expect(
      sdk().models.embedContent({ model: EMBED, contents: 'x', config: { outputDimensionality: 4000 } }),
    ).rejects.toMatchObject({ status: 400 });
  });
});

describe('an embedding model of a gemini provider', () => {
  const charges = async (accountId: string) => {
    await gw.deps.credit.flush();
    const q = 'SELECT cost_vnd FROM usage_records WHERE account_id = $1';
    return (await gw.deps.db.query(q, [accountId])).rows.map((x) => Number(x.cost_vnd));
  };
  const costOf = (texts: string[]) =>
    tokensCost(gw.deps.catalog.get(EMBED)!.pricing, tokensFromChars(Buffer.byteLength(texts.join(''))));

  test('the Gemini routes forward embedContent and batchEmbedContents as sent, billed by input tokens', async () => {
    const acct = await gw.account(1_000_000);
    const ai = new GoogleGenAI({ apiKey: acct.key, httpOptions: { baseUrl: gw.url } });
    const texts = ['first text', 'a second, longer text to embed'];
    const r = await ai.models.embedContent({
      model: EMBED,
      contents: texts,
      config: { outputDimensionality: 8, taskType: 'RETRIEVAL_DOCUMENT' },
    });
    expect(r.embeddings!.map((e) => e.values!.length)).toEqual([8, 8]);
    const [call] = upstream();
    expect(call.path).toBe(`/gemini/v1beta/models/${EMBED}:batchEmbedContents`);
    expect(call.body.requests).toEqual(
      texts.map((text) => ({
        model: `models/${EMBED}`,
        content: { parts: [{ text }], role: 'user' },
        taskType: 'RETRIEVAL_DOCUMENT',
        outputDimensionality: 8,
      })),
    );
    expect(await charges(acct.accountId)).toEqual([costOf(texts)]);
    expect(costOf(texts)).toBeGreaterThan(0);
    expect(r.sdkHttpResponse!.headers!['x-gateway-cost-vnd']).toBe(String(costOf(texts)));

    const one = await fetch(`${gw.url}/v1beta/models/${EMBED}:embedContent`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-goog-api-key': acct.key },
      body: JSON.stringify({ content: { parts: [{ text: 'first text' }] }, outputDimensionality: 8 }),
    });
    expect(one.status).toBe(200);
    expect(((await one.json()) as any).embedding.values).toEqual(r.embeddings![0].values);
    expect(upstream()[1]).toEqual({
      path: `/gemini/v1beta/models/${EMBED}:embedContent`,
      body: { content: { parts: [{ text: 'first text' }] }, outputDimensionality: 8 },
    });
    expect(await charges(acct.accountId)).toHaveLength(2);

    gw.emulator.control.addFault({ match: ':embedContent', status: 429, times: 1 });
    const limited = await fetch(`${gw.url}/v1beta/models/${EMBED}:embedContent`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-goog-api-key': acct.key },
      body: JSON.stringify({ content: { parts: [{ text: 'x' }] } }),
    });
    expect(limited.status).toBe(429);
    expect(((await limited.json()) as any).error.message).toEqual(expect.any(String));
    // The refused call is recorded at no cost.
    expect((await charges(acct.accountId)).filter((c) => c > 0)).toHaveLength(2);
  });

  test('/v1/embeddings (OpenAI SDK) becomes batchEmbedContents; listed and priced', async () => {
    const acct = await gw.account(1_000_000);
    const o = new OpenAI({ apiKey: acct.key, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const texts = ['first text', 'second text'];
    const r = await o.embeddings.create({ model: EMBED, input: texts, dimensions: 8 });
    expect(upstream()[0].path).toBe(`/gemini/v1beta/models/${EMBED}:batchEmbedContents`);
    const direct = await new GoogleGenAI({
      apiKey: 'emu',
      httpOptions: { baseUrl: `${gw.emulator.url}/gemini`, apiVersion: 'v1beta' },
    }).models.embedContent({ model: EMBED, contents: texts, config: { outputDimensionality: 8 } });
    expect(r.data.map((d) => d.embedding)).toEqual(direct.embeddings!.map((e) => e.values));
    expect(r.data.map((d) => d.index)).toEqual([0, 1]);
    const tokens = tokensFromChars(Buffer.byteLength(texts.join('')));
    expect(r.usage).toEqual({ prompt_tokens: tokens, total_tokens: tokens });
    expect(await charges(acct.accountId)).toEqual([costOf(texts)]);
    const floats = await o.embeddings.create({ model: EMBED, input: 'first text', encoding_format: 'float' });
    expect(floats.data[0].embedding).toHaveLength(3072);
    expect(upstream().at(-1)!.path).toBe(`/gemini/v1beta/models/${EMBED}:embedContent`);
    await expect(o.embeddings.create({ model: EMBED, input: [[1, 2, 3]] })).rejects.toMatchObject({ status: 400 });
    expect((await charges(acct.accountId)).filter((c) => c > 0)).toHaveLength(2);

    const listed = (await o.models.list()).data.map((m) => m.id);
    expect(listed).toContain(EMBED);
    const pub = (await (await fetch(`${gw.url}/public/models`)).json()) as any;
    expect(JSON.stringify(pub)).toContain(EMBED);
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
