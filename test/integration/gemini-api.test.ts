import { GoogleGenAI, FunctionCallingConfigMode, type Content } from '@google/genai';
import { startGateway, type TestGateway } from '../support/gateway';

/**
 * The Gemini API (/v1beta/models/...) through the real gateway with the official @google/genai SDK, on a chat model
 * of every upstream kind: an OpenAI chat upstream (gpt-4o-mini), a Responses-only one (gpt-5-codex) and an
 * Anthropic one (claude-sonnet-4-6), each translated to chat and back; plus embeddings, the model list, auth and
 * errors in Google's shape, and billing.
 */

let gw: TestGateway;
let key: string;
beforeAll(async () => {
  gw = await startGateway({ logLevel: 'warn' }, { temporal: false });
  ({ key } = await gw.account(5_000_000));
});
afterAll(() => gw.close());
afterEach(() => gw.emulator.control.reset());

const ai = (k = key) => new GoogleGenAI({ apiKey: k, httpOptions: { baseUrl: gw.url } });
const upstream = () =>
  gw.emulator.control.requests.filter((r) => r.method === 'POST').map((r) => ({ path: r.path, body: r.body as any }));
const weather = {
  name: 'get_weather',
  description: 'Current weather',
  parametersJsonSchema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};

async function usageRows(accountId: string): Promise<any[]> {
  await gw.deps.credit.flush();
  const r = await gw.deps.db.query(
    'SELECT operation, units, cost_vnd, status, model FROM usage_records WHERE account_id = $1 ORDER BY created_at, id',
    [accountId],
  );
  return r.rows;
}

describe.each([
  ['an OpenAI chat upstream', 'gpt-4o-mini', '/openai/v1/chat/completions'],
  ['a Responses-only upstream', 'gpt-5-codex', '/openai/v1/responses'],
  ['an Anthropic upstream', 'claude-sonnet-4-6', '/anthropic/v1/messages'],
])('on %s (%s)', (_kind, model, path) => {
  test('generateContent: system instruction, settings, usageMetadata', async () => {
    const r = await ai().models.generateContent({
      model,
      contents: 'hi there',
      config: { systemInstruction: 'Be brief.', temperature: 0.5, topP: 0.9, maxOutputTokens: 300 },
    });
    expect(r.text).toBe('You said: hi there');
    expect(r.candidates![0].finishReason).toBe('STOP');
    const u = r.usageMetadata!;
    expect(u.promptTokenCount).toBeGreaterThan(0);
    expect(u.candidatesTokenCount).toBeGreaterThan(0);
    expect(u.totalTokenCount).toBe(u.promptTokenCount! + u.candidatesTokenCount! + (u.thoughtsTokenCount ?? 0));
    expect(r.modelVersion).toBe(model);
    const [call] = upstream();
    expect(call.path).toBe(path);
    expect(JSON.stringify(call.body)).toContain('Be brief.');
  });

  test('a tool round trip: the function call, then its response, then the answer', async () => {
    const tools = [{ functionDeclarations: [weather] }];
    const first = await ai().models.generateContent({ model, contents: 'Weather in Hanoi?', config: { tools } });
    const calls = first.functionCalls!;
    expect(calls).toHaveLength(1);
    expect(calls[0]).toMatchObject({ name: 'get_weather', args: { city: 'example' } });
    const history: Content[] = [
      { role: 'user', parts: [{ text: 'Weather in Hanoi?' }] },
      first.candidates![0].content!,
      {
        role: 'user',
        parts: [{ functionResponse: { id: calls[0].id, name: 'get_weather', response: { output: 'sunny, 31C' } } }],
      },
    ];
    const second = await ai().models.generateContent({ model, contents: history, config: { tools } });
    expect(second.text).toBe('The tool returned: sunny, 31C');
    expect(second.functionCalls).toBeUndefined();
  });

  test('streamGenerateContent (SSE): text in pieces, the last with finishReason and usage', async () => {
    const chunks = [];
    for await (const c of await ai().models.generateContentStream({ model, contents: 'one two three four' }))
      chunks.push(c);
    expect(chunks.length).toBeGreaterThan(1);
    expect(chunks.map((c) => c.text ?? '').join('')).toBe('You said: one two three four');
    const last = chunks.at(-1)!;
    expect(last.candidates![0].finishReason).toBe('STOP');
    expect(last.usageMetadata!.promptTokenCount).toBeGreaterThan(0);
    expect(last.usageMetadata!.candidatesTokenCount).toBeGreaterThan(0);
  });

  test('a streamed function call arrives whole, with its arguments', async () => {
    const chunks = [];
    const config = {
      tools: [{ functionDeclarations: [weather] }],
      toolConfig: { functionCallingConfig: { mode: FunctionCallingConfigMode.ANY } },
    };
    for await (const c of await ai().models.generateContentStream({ model, contents: 'Weather?', config }))
      chunks.push(c);
    const calls = chunks.flatMap((c) => c.functionCalls ?? []);
    expect(calls).toEqual([expect.objectContaining({ name: 'get_weather', args: { city: 'example' } })]);
  });

  test('JSON mode: responseMimeType and responseSchema', async () => {
    const r = await ai().models.generateContent({
      model,
      contents: 'hi',
      config: {
        responseMimeType: 'application/json',
        responseSchema: { type: 'OBJECT' as never, properties: { reply: { type: 'STRING' as never } } },
      },
    });
    expect(JSON.parse(r.text!)).toEqual({ reply: expect.stringContaining('hi') });
  });

  test('countTokens', async () => {
    const r = await ai().models.countTokens({ model, contents: 'count these words please' });
    expect(r.totalTokens).toBeGreaterThan(0);
  });
});

test('stop sequences, an inline image and a thinking budget reach a chat upstream as chat fields', async () => {
  const png = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';
  const r = await ai().models.generateContent({
    model: 'o4-mini',
    contents: [{ role: 'user', parts: [{ text: 'look' }, { inlineData: { mimeType: 'image/png', data: png } }] }],
    config: { stopSequences: ['END'], maxOutputTokens: 500, thinkingConfig: { thinkingBudget: 20000 } },
  });
  expect(r.text).toBeDefined();
  const [call] = upstream();
  expect(call.body).toMatchObject({ stop: ['END'], max_completion_tokens: 500, reasoning_effort: 'high' });
  expect(call.body.messages[0].content).toEqual([
    { type: 'text', text: 'look' },
    { type: 'image_url', image_url: { url: `data:image/png;base64,${png}` } },
  ]);
});

test('usageMetadata counts cached and thought tokens apart', async () => {
  const r = await ai().models.generateContent({ model: 'o4-mini', contents: 'hi [cache_read=40] [reasoning=30]' });
  const u = r.usageMetadata!;
  expect(u.cachedContentTokenCount).toBe(40);
  expect(u.thoughtsTokenCount).toBe(30);
  expect(u.totalTokenCount).toBe(u.promptTokenCount! + u.candidatesTokenCount! + 30);
});

test('embedContent and batchEmbedContents on an embedding model', async () => {
  const r = await ai().models.embedContent({
    model: 'text-embedding-3-small',
    contents: ['first text', 'second text'],
  });
  expect(r.embeddings).toHaveLength(2);
  expect(r.embeddings![0].values!.length).toBeGreaterThan(10);
  expect(r.embeddings![0].values).not.toEqual(r.embeddings![1].values);
  const one = await fetch(`${gw.url}/v1beta/models/text-embedding-3-small:embedContent`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-goog-api-key': key },
    body: JSON.stringify({ content: { parts: [{ text: 'first text' }] } }),
  });
  expect(one.status).toBe(200);
  expect(((await one.json()) as any).embedding.values).toEqual(r.embeddings![0].values);
});

test('GET /v1beta/models and /v1beta/models/{model} list the chat and embedding models', async () => {
  const names: string[] = [];
  for await (const m of await ai().models.list()) names.push(m.name!);
  expect(names).toEqual(
    expect.arrayContaining(['models/gpt-4o-mini', 'models/claude-sonnet-4-6', 'models/text-embedding-3-small']),
  );
  expect(names).not.toContain('models/tts-1');
  const m = await ai().models.get({ model: 'claude-opus-4-7' });
  expect(m).toMatchObject({
    name: 'models/claude-opus-4-6',
    outputTokenLimit: 64000,
    supportedActions: expect.arrayContaining(['generateContent']),
  });
});

test("the key by ?key=, and errors in Google's shape", async () => {
  const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${gw.url}${url}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });
  const ok = await post(`/v1beta/models/gpt-4o-mini:generateContent?key=${key}`, {
    contents: [{ parts: [{ text: 'hi' }] }],
  });
  expect(ok.status).toBe(200);
  const noKey = await post('/v1beta/models/gpt-4o-mini:generateContent', { contents: [{ parts: [{ text: 'hi' }] }] });
  expect(noKey.status).toBe(401);
  const noKeyBody = (await noKey.json()) as any;
  expect(Object.keys(noKeyBody.error).sort()).toEqual(['code', 'details', 'message', 'status']);
  expect(noKeyBody.error).toMatchObject({
    code: 401,
    status: 'UNAUTHENTICATED',
    details: [{ reason: 'missing_api_key' }],
  });
  const unknown = await post(
    '/v1beta/models/nope-1:generateContent',
    { contents: [{ parts: [{ text: 'hi' }] }] },
    { 'x-goog-api-key': key },
  );
  expect(unknown.status).toBe(404);
  expect(await unknown.json()).toMatchObject({ error: { code: 404, status: 'NOT_FOUND' } });
  const bad = await post('/v1beta/models/gpt-4o-mini:generateContent', { contents: [] }, { 'x-goog-api-key': key });
  expect(bad.status).toBe(400);
  expect(await bad.json()).toMatchObject({ error: { code: 400, status: 'INVALID_ARGUMENT' } });
  await expect(ai('sk-wrong').models.generateContent({ model: 'gpt-4o-mini', contents: 'hi' })).rejects.toMatchObject({
    status: 401,
  });
  expect(upstream()).toHaveLength(1);
});

test('streamGenerateContent without alt=sse streams a JSON array', async () => {
  const res = await fetch(`${gw.url}/v1beta/models/gpt-4o-mini:streamGenerateContent`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-goog-api-key': key },
    body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'a b c' }] }] }),
  });
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  const arr = JSON.parse(await res.text()) as any[];
  expect(arr.length).toBeGreaterThan(1);
  expect(arr.map((r) => r.candidates[0].content.parts.map((p: any) => p.text ?? '').join('')).join('')).toBe(
    'You said: a b c',
  );
  expect(arr.at(-1).usageMetadata.totalTokenCount).toBeGreaterThan(0);
});

describe('billing', () => {
  test("one charge at the upstream's usage, the cost header, 402 without funds before any upstream call", async () => {
    const acct = await gw.account(1_000_000);
    const { sdkHttpResponse, usageMetadata } = await ai(acct.key).models.generateContent({
      model: 'gpt-4o-mini',
      contents: 'bill me',
    });
    const rows = await usageRows(acct.accountId);
    expect(rows).toHaveLength(1);
    const price = gw.deps.catalog.get('gpt-4o-mini')!.pricing;
    const expected = Math.ceil(
      (usageMetadata!.promptTokenCount! * price.inputPer1MTokens! +
        usageMetadata!.candidatesTokenCount! * price.outputPer1MTokens!) /
        1e6,
    );
    expect(rows[0]).toMatchObject({ operation: 'gemini.generateContent', status: 200, model: 'gpt-4o-mini' });
    expect(Number(rows[0].cost_vnd)).toBe(expected);
    expect(sdkHttpResponse!.headers!['x-gateway-cost-vnd']).toBe(String(expected));
    const poor = await gw.account(0);
    await expect(ai(poor.key).models.generateContent({ model: 'gpt-4o-mini', contents: 'hi' })).rejects.toMatchObject({
      status: 402,
    });
    expect(upstream()).toHaveLength(1);
  });

  test('a stream the client leaves is billed what was delivered', async () => {
    const acct = await gw.account(1_000_000);
    gw.emulator.control.settings.chunkDelayMs = 50;
    const ac = new AbortController();
    const stream = await ai(acct.key).models.generateContentStream({
      model: 'claude-sonnet-4-6',
      contents: 'a b c d e f g h i j k l m n o p',
      config: { abortSignal: ac.signal },
    });
    await expect(
      (async () => {
        for await (const _ of stream) ac.abort();
      })(),
    ).rejects.toThrow();
    let rows: any[] = [];
    for (let i = 0; i < 100 && rows.length === 0; i++) {
      await new Promise((r) => setTimeout(r, 25));
      rows = await usageRows(acct.accountId);
    }
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ status: 499, units: { estimated: 1 } });
    expect(Number(rows[0].cost_vnd)).toBeGreaterThan(0);
  });
});

test('maxOutputTokens above the cap: clamped under a pattern name, as sent under the id', async () => {
  const r = await ai().models.generateContent({
    model: 'claude-opus-4-7',
    contents: 'hi',
    config: { maxOutputTokens: 128000 },
  });
  expect(r.sdkHttpResponse!.headers!['x-gateway-max-tokens-clamped']).toBe('128000->64000');
  expect(upstream()[0].body.max_tokens).toBe(64000);
});

test('an upstream breaking off mid-stream ends the stream with a Gemini error, billed what was delivered', async () => {
  const acct = await gw.account(1_000_000);
  const res = await fetch(`${gw.url}/v1beta/models/claude-sonnet-4-6:streamGenerateContent?alt=sse`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-goog-api-key': acct.key },
    body: JSON.stringify({
      contents: [
        { role: 'user', parts: [{ text: 'one two three four five six seven eight EMULATOR_DROP_MIDSTREAM' }] },
      ],
    }),
  });
  expect(res.status).toBe(200);
  const events = (await res.text())
    .split('\n\n')
    .filter((e) => e.startsWith('data: '))
    .map((e) => JSON.parse(e.slice(6)));
  expect(events[0].candidates[0].content.parts[0].text).toBeDefined();
  expect(events.at(-1)).toEqual({ error: { code: 502, message: expect.any(String), status: 'INTERNAL' } });
  let rows: any[] = [];
  for (let i = 0; i < 100 && rows.length === 0; i++) rows = await usageRows(acct.accountId);
  expect(rows[0]).toMatchObject({ status: 502, units: { estimated: 1 } });
  expect(Number(rows[0].cost_vnd)).toBeGreaterThan(0);
});
