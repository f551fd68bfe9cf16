import { gzipSync } from 'node:zlib';
import { startGateway, type TestGateway } from '../support/gateway';
import { post as postTo } from '../support/http';

// JSON request bodies: raw-body (compressed ones inflated by zlib first), strict UTF-8, JSON.parse; prototype keys
// refused; nothing charged for a refused body.
let gw: TestGateway;
let key = '';
let accountId = '';
beforeAll(async () => {
  gw = await startGateway({}, { temporal: false });
  ({ key, accountId } = await gw.account(1_000_000));
});
afterAll(() => gw.close());

const chat = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] });

async function post(body: string | Buffer, headers: Record<string, string> = {}) {
  const res = await postTo(`${gw.url}/v1/chat/completions`, body, { key, headers });
  return { status: res.status, json: res.body };
}

test('gzip bodies are inflated; a body that is not what its Content-Encoding says is a 400', async () => {
  const ok = await post(gzipSync(chat), { 'content-encoding': 'gzip' });
  expect(ok.status).toBe(200);
  expect(ok.json.choices).toHaveLength(1);
  const bad = await post(chat, { 'content-encoding': 'gzip' });
  expect(bad.status).toBe(400);
  expect(bad.json.error?.code).toBe('invalid_body_encoding');
});

test('JSON media types with parameters or a +json suffix are accepted', async () => {
  expect((await post(chat, { 'content-type': 'application/json; charset=utf-8' })).status).toBe(200);
  expect((await post(chat, { 'content-type': 'application/vnd.api+json' })).status).toBe(200);
});

test('prototype keys and an empty body are refused with the OpenAI error shape, and nothing is charged', async () => {
  await gw.deps.credit.flush();
  const before = (
    await gw.deps.db.query('SELECT count(*)::int AS n FROM usage_records WHERE account_id = $1', [accountId])
  ).rows[0].n;
  const proto = await post(
    '{"__proto__":{"isAdmin":true},"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}',
  );
  expect(proto.status).toBe(400);
  expect(proto.json.error?.code).toBe('invalid_json');
  const ctor = await post(
    '{"constructor":{"prototype":{"x":1}},"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}',
  );
  expect(ctor.status).toBe(400);
  expect(ctor.json.error?.code).toBe('invalid_json');
  const empty = await post('');
  expect(empty.status).toBe(400);
  expect(empty.json.error?.param).toBe('model');
  await gw.deps.credit.flush();
  const after = (
    await gw.deps.db.query('SELECT count(*)::int AS n FROM usage_records WHERE account_id = $1', [accountId])
  ).rows[0].n;
  expect(after).toBe(before);
});

test('a body that is not UTF-8 is a 400 in the interface shape, plain or gzip, never read as U+FFFD', async () => {
  const sent = gw.emulator.control.requests.length;
  const batchesBefore = (await gw.deps.db.query('SELECT count(*)::int AS n FROM batches')).rows[0].n;
  /** `json` with `bytes` (not UTF-8) in place of `@`. */
  const raw = (json: string, bytes: number[]) => {
    const [a, b] = json.split('@');
    return Buffer.concat([Buffer.from(a), Buffer.from(bytes), Buffer.from(b)]);
  };
  const chatWith = (bytes: number[]) =>
    raw('{"model":"gpt-4o-mini","messages":[{"role":"user","content":"a@b"}]}', bytes);
  // A stray byte, an overlong "/", a surrogate encoded on its own, a sequence cut short.
  for (const bytes of [[0xff], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xe2, 0x82]]) {
    for (const [how, body, headers] of [
      ['plain', chatWith(bytes), {}],
      ['gzip', gzipSync(chatWith(bytes)), { 'content-encoding': 'gzip' }],
    ] as const) {
      const r = await post(body, headers);
      expect({ how, bytes, status: r.status, error: r.json.error }).toEqual({
        how,
        bytes,
        status: 400,
        error: expect.objectContaining({ type: 'invalid_request_error', code: 'invalid_encoding' }),
      });
    }
  }
  // Anthropic's shape on /v1/messages; a batch's metadata is not stored as U+FFFD.
  const messages = await postTo(
    `${gw.url}/v1/messages`,
    raw('{"model":"claude-haiku-4-5","max_tokens":5,"messages":[{"role":"user","content":"@"}]}', [0xff]),
    { key, headers: { 'anthropic-version': '2023-06-01' } },
  );
  expect(messages.status).toBe(400);
  expect(messages.body).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } });
  expect(messages.body.error.message).toMatch(/UTF-8/);
  const batch = await postTo(
    `${gw.url}/v1/batches`,
    raw(
      '{"input_file_id":"file-x","endpoint":"/v1/chat/completions","completion_window":"24h","metadata":{"k":"@"}}',
      [0xfe],
    ),
    { key },
  );
  expect({ status: batch.status, code: batch.body.error?.code }).toEqual({ status: 400, code: 'invalid_encoding' });
  expect((await gw.deps.db.query('SELECT count(*)::int AS n FROM batches')).rows[0].n).toBe(batchesBefore);
  expect(gw.emulator.control.requests.length).toBe(sent);
  // Real UTF-8 (Vietnamese, an emoji) goes through as sent.
  const ok = await post(
    Buffer.from(JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Xin chào 🌏' }] })),
  );
  expect(ok.status).toBe(200);
  expect(ok.json.choices[0].message.content).toContain('Xin chào 🌏');
});
