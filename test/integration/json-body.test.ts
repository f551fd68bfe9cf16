import { gzipSync } from 'node:zlib';
import { startGateway, type TestGateway } from '../support/gateway';
import { post as postTo } from '../support/http';

// JSON request bodies: plain ones through raw-body + JSON.parse, compressed ones through koa-body (loaded on first
// use); prototype keys refused; nothing charged for a refused body.
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
