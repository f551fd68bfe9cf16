import { startGateway, type TestGateway } from '../support/gateway';

/**
 * Every OpenAI-shaped object the gateway emits carries the fields OpenAI's published schema (openai-openapi) marks
 * required, null where OpenAI sends null, on native and translated paths alike: a typed or strict client reads
 * the gateway as it reads OpenAI. `[]` in a path means every element; a key present with null counts as present.
 */

const REQUIRED: Record<string, string[]> = {
  'chat.completion': [
    ...['id', 'object', 'created', 'model', 'choices', 'choices[].index', 'choices[].finish_reason'],
    ...['choices[].logprobs', 'choices[].message.role', 'choices[].message.content', 'choices[].message.refusal'],
  ],
  'chat.completion.chunk': ['id', 'object', 'created', 'model', 'choices', 'choices[].index', 'choices[].delta'],
  text_completion: ['id', 'object', 'created', 'model', 'choices[].text', 'choices[].index', 'choices[].logprobs'],
  list_embedding: ['object', 'data[].object', 'data[].embedding', 'data[].index', 'model', 'usage.prompt_tokens'],
  response: [
    ...['id', 'object', 'created_at', 'model', 'status', 'output', 'error', 'incomplete_details', 'instructions'],
    ...['metadata', 'parallel_tool_calls', 'tool_choice', 'tools', 'temperature', 'top_p'],
    ...['usage.input_tokens', 'usage.input_tokens_details.cached_tokens', 'usage.output_tokens'],
    ...['usage.input_tokens_details.cache_write_tokens', 'usage.output_tokens_details.reasoning_tokens'],
    ...['usage.total_tokens', 'tools[].type', 'tools[].name', 'tools[].parameters', 'tools[].strict'],
  ],
  'response.event': ['type', 'sequence_number'],
  file: ['id', 'object', 'bytes', 'created_at', 'filename', 'purpose', 'status', 'expires_at'],
  batch: ['id', 'object', 'endpoint', 'input_file_id', 'completion_window', 'status', 'created_at', 'request_counts'],
  model: ['id', 'object', 'created', 'owned_by'],
  error: ['error.message', 'error.type', 'error.param', 'error.code'],
};

/** The required paths `obj` lacks. */
function missing(obj: unknown, paths: string[]): string[] {
  const lacks = (v: unknown, parts: string[]): boolean => {
    if (!parts.length) return false;
    const [head, ...rest] = parts;
    const many = head.endsWith('[]');
    const key = many ? head.slice(0, -2) : head;
    if (v === null || typeof v !== 'object' || !(key in v)) return true;
    const next = (v as Record<string, unknown>)[key];
    if (!many) return rest.length > 0 && next !== null ? lacks(next, rest) : rest.length > 0 && next === null;
    return !Array.isArray(next) || next.some((e) => lacks(e, rest));
  };
  return paths.filter((p) => lacks(obj, p.split('.')));
}

const shapeOf = (kind: string, obj: unknown) => ({ kind, missing: missing(obj, REQUIRED[kind]) });
const ok = (kind: string) => ({ kind, missing: [] });

let gw: TestGateway;
let key: string;
beforeAll(async () => {
  gw = await startGateway({ logLevel: 'warn' }, { temporal: true });
  ({ key } = await gw.account(5_000_000));
});
afterAll(() => gw.close());

async function post(path: string, body: unknown): Promise<Response> {
  return fetch(`${gw.url}/v1${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}
const get = async (path: string): Promise<any> =>
  (await fetch(`${gw.url}/v1${path}`, { headers: { authorization: `Bearer ${key}` } })).json();

/** The `data:` payloads of an SSE answer, [DONE] left out. */
async function events(res: Response): Promise<any[]> {
  const text = await res.text();
  return text
    .split('\n')
    .filter((l) => l.startsWith('data: ') && l !== 'data: [DONE]')
    .map((l) => JSON.parse(l.slice(6)));
}

// Native (gpt-4o-mini, gpt-5-codex on Responses) and translated (Claude, Gemini, Responses-only upstreams).
const CHAT_MODELS = ['gpt-4o-mini', 'claude-sonnet-4-6', 'gemini-2.5-flash', 'gpt-5-codex'];
const RESPONSE_MODELS = ['gpt-5-codex', 'gpt-4o-mini', 'claude-sonnet-4-6', 'gemini-2.5-flash'];
const TOOL = { type: 'function', name: 'shell', description: 'run', parameters: { type: 'object', properties: {} } };

test.each(CHAT_MODELS)('chat completion and its chunks on %s', async (model) => {
  const messages = [{ role: 'user', content: 'hi' }];
  const c: any = await (await post('/chat/completions', { model, messages })).json();
  expect(shapeOf('chat.completion', c)).toEqual(ok('chat.completion'));
  expect(c.choices[0]).toMatchObject({ logprobs: null, message: { refusal: null } });
  const chunks = await events(
    await post('/chat/completions', { model, messages, stream: true, stream_options: { include_usage: true } }),
  );
  expect(chunks.length).toBeGreaterThan(1);
  for (const ch of chunks) expect(shapeOf('chat.completion.chunk', ch)).toEqual(ok('chat.completion.chunk'));
});

test.each(RESPONSE_MODELS)('response and its stream events on %s', async (model) => {
  const body = { model, input: 'hi', tools: [TOOL] };
  const r: any = await (await post('/responses', body)).json();
  expect(shapeOf('response', r)).toEqual(ok('response'));
  expect(r.usage.input_tokens_details.cache_write_tokens).toEqual(expect.any(Number));
  const evs = await events(await post('/responses', { ...body, stream: true }));
  for (const e of evs) expect(shapeOf('response.event', e)).toEqual(ok('response.event'));
  const done = evs.find((e) => e.type === 'response.completed');
  expect(shapeOf('response', done?.response)).toEqual(ok('response'));
});

test('legacy completion, embedding list, model, error', async () => {
  const c = await (await post('/completions', { model: 'gpt-3.5-turbo-instruct', prompt: 'hi' })).json();
  expect(shapeOf('text_completion', c)).toEqual(ok('text_completion'));
  for (const model of ['text-embedding-3-small', 'gemini-embedding-001']) {
    const e = await (await post('/embeddings', { model, input: ['a', 'b'] })).json();
    expect(shapeOf('list_embedding', e)).toEqual(ok('list_embedding'));
  }
  const list = await get('/models');
  for (const m of list.data) expect(shapeOf('model', m)).toEqual(ok('model'));
  expect(shapeOf('model', await get('/models/gpt-4o-mini'))).toEqual(ok('model'));
  const err = await (await post('/chat/completions', { model: 'no-such-model', messages: [] })).json();
  expect(shapeOf('error', err)).toEqual(ok('error'));
});

test('file and batch', async () => {
  const line = { custom_id: 'a', method: 'POST', url: '/v1/chat/completions', body: { model: 'gpt-4o-mini' } };
  line.body = { ...line.body, messages: [{ role: 'user', content: 'hi' }] } as typeof line.body;
  const form = new FormData();
  form.set('purpose', 'batch');
  form.set('file', new Blob([JSON.stringify(line) + '\n']), 'in.jsonl');
  const up = await fetch(`${gw.url}/v1/files`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}` },
    body: form,
  });
  const file: any = await up.json();
  expect(shapeOf('file', file)).toEqual(ok('file'));
  // Batch input files expire 30 days after upload, as OpenAI's do.
  expect(file.expires_at).toBe(file.created_at + 30 * 86_400);
  expect(await get(`/files/${file.id}`)).toEqual(file);
  const batch = await (
    await post('/batches', { input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' })
  ).json();
  expect(shapeOf('batch', batch)).toEqual(ok('batch'));
});
