import OpenAI from 'openai';
import { startGateway, type TestGateway } from '../support/gateway';
import { loadConfig } from '../../src/config';
import { revokeApiKey } from '../../src/auth/apiKeys';
import { topUp, placeHold } from '../../src/billing/ledger';
import { randomUUID } from 'node:crypto';

/**
 * The foundation over real HTTP: auth, the account endpoint, the model catalog endpoints, error shapes and
 * statuses, health/readiness, metrics and request ids. Real Postgres and the run's Temporal dev server.
 */

let gw: TestGateway;
const JSON_LIMIT = 4096;

beforeAll(async () => {
  // The production key-cache TTL, so the revocation test proves the real bound; a small JSON limit for the 413.
  gw = await startGateway({ logLevel: 'warn', keyCacheMs: loadConfig().keyCacheMs, maxJsonBytes: JSON_LIMIT });
});
afterAll(() => gw.close());

/** fetch's json() is typed unknown; these tests inspect arbitrary JSON. */
const json = (res: Response): Promise<any> => res.json();
const get = (path: string, headers: Record<string, string> = {}) => fetch(gw.url + path, { headers });
const post = (path: string, body: string, headers: Record<string, string> = {}) =>
  fetch(gw.url + path, { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } });

function expectOpenAIError(body: any, code?: string) {
  expect(Object.keys(body)).toEqual(['error']);
  expect(Object.keys(body.error).sort()).toEqual(['code', 'message', 'param', 'type']);
  expect(typeof body.error.message).toBe('string');
  expect(body.error.message.length).toBeGreaterThan(0);
  expect(typeof body.error.type).toBe('string');
  expect(body.error.param === null || typeof body.error.param === 'string').toBe(true);
  expect(body.error.code === null || typeof body.error.code === 'string').toBe(true);
  if (code) expect(body.error.code).toBe(code);
}

describe('auth', () => {
  test('Authorization: Bearer and x-api-key are both accepted', async () => {
    const { key } = await gw.account(1000);
    expect((await get('/v1/models', { authorization: `Bearer ${key}` })).status).toBe(200);
    expect((await get('/v1/models', { 'x-api-key': key })).status).toBe(200);
    const client = new OpenAI({ apiKey: key, baseURL: gw.url + '/v1', maxRetries: 0 });
    const page = await client.models.list();
    expect(page.data.length).toBeGreaterThan(0);
  });

  test('missing key: 401 in the OpenAI shape', async () => {
    const res = await get('/v1/models');
    expect(res.status).toBe(401);
    const body = await json(res);
    expectOpenAIError(body, 'missing_api_key');
    expect(body.error.type).toBe('invalid_request_error');
  });

  test.each([
    ['an unknown key', { authorization: 'Bearer sk-gw-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' }],
    ['a malformed key', { authorization: 'Bearer not-a-key' }],
    ['a wrong scheme', { authorization: 'Basic dXNlcjpwYXNz' }],
    ['a bad x-api-key', { 'x-api-key': 'sk-gw-nope' }],
  ])('%s: 401 in the OpenAI shape', async (_what, headers) => {
    const res = await get('/v1/account', headers as Record<string, string>);
    expect(res.status).toBe(401);
    expectOpenAIError(await json(res));
  });

  test('the SDK sees a bad key as an AuthenticationError', async () => {
    const client = new OpenAI({
      apiKey: 'sk-gw-wrongwrongwrongwrongwrongwrongwr',
      baseURL: gw.url + '/v1',
      maxRetries: 0,
    });
    await expect(client.models.list()).rejects.toMatchObject({ status: 401 });
  });

  test('a revoked key is refused within a few seconds', async () => {
    const { accountId, key, keyId } = await gw.account(1000);
    expect((await get('/v1/account', { authorization: `Bearer ${key}` })).status).toBe(200); // now cached
    expect(await revokeApiKey(gw.deps.db, accountId, keyId)).toBe(true);
    const deadline = Date.now() + 5000;
    let status = 200;
    while (Date.now() < deadline) {
      status = (await get('/v1/account', { authorization: `Bearer ${key}` })).status;
      if (status === 401) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(status).toBe(401);
  });
});

describe('GET /v1/account', () => {
  test('balance, held and recent ledger entries in integer VND', async () => {
    const { accountId, key } = await gw.account(5_000_000);
    await topUp(gw.deps.db, { accountId, amount: 250_000, idempotencyKey: `t:${randomUUID()}`, memo: 'bank transfer' });
    await placeHold(gw.deps.db, {
      accountId,
      holdId: randomUUID(),
      amount: 100_000,
      idempotencyKey: `h:${randomUUID()}`,
      refType: 'video',
      refId: 'job-1',
    });
    const res = await get('/v1/account', { authorization: `Bearer ${key}` });
    expect(res.status).toBe(200);
    const body = await json(res);
    expect(body).toMatchObject({
      object: 'account',
      id: accountId,
      currency: 'VND',
      balance_vnd: 5_250_000,
      held_vnd: 100_000,
      available_vnd: 5_150_000,
    });
    expect(body.ledger.map((e: any) => [e.type, e.amount_vnd])).toEqual([
      ['hold_placed', 100_000],
      ['topped_up', 250_000],
      ['topped_up', 5_000_000],
    ]);
    for (const e of body.ledger) expect(Number.isInteger(e.amount_vnd)).toBe(true);
    expect(body.ledger[1].memo).toBe('bank transfer');

    const one = await json(await get('/v1/account?limit=1', { authorization: `Bearer ${key}` }));
    expect(one.ledger).toHaveLength(1);
    const bad = await get('/v1/account?limit=abc', { authorization: `Bearer ${key}` });
    expect(bad.status).toBe(400);
    expect((await json(bad)).error.param).toBe('limit');
  });

  test('each caller sees only their own account', async () => {
    const a = await gw.account(111);
    const b = await gw.account(222);
    const ra = await json(await get('/v1/account', { authorization: `Bearer ${a.key}` }));
    const rb = await json(await get('/v1/account', { authorization: `Bearer ${b.key}` }));
    expect([ra.id, ra.balance_vnd]).toEqual([a.accountId, 111]);
    expect([rb.id, rb.balance_vnd]).toEqual([b.accountId, 222]);
  });
});

/** The numbers in a model's pricing, however deep (a video model's per-second table is an array of rows). */
function pricesOf(v: unknown): number[] {
  if (typeof v === 'number') return [v];
  if (v && typeof v === 'object') return Object.values(v).flatMap(pricesOf);
  return [];
}

describe('model catalog', () => {
  let key: string;
  beforeAll(async () => {
    key = (await gw.account(0)).key;
  });

  test('GET /v1/models: auth required, OpenAI list shape with mode and VND pricing, every mode present', async () => {
    expect((await get('/v1/models')).status).toBe(401);
    const body = await json(await get('/v1/models', { authorization: `Bearer ${key}` }));
    expect(body.object).toBe('list');
    for (const m of body.data) {
      expect(m).toMatchObject({
        id: expect.any(String),
        object: 'model',
        created: expect.any(Number),
        owned_by: expect.any(String),
        mode: expect.any(String),
        currency: 'VND',
      });
      // Every price is integer VND, in a video model's per-second table too (its rows also name their dimensions).
      expect(pricesOf(m.pricing).filter((v) => !Number.isInteger(v))).toEqual([]);
      expect(pricesOf(m.pricing).length).toBeGreaterThan(0);
    }
    const modes = new Set(body.data.map((m: any) => m.mode));
    for (const mode of ['chat', 'completion', 'embedding', 'speech', 'transcription', 'image', 'video'])
      expect(modes).toContain(mode);
    const chat = body.data.find((m: any) => m.id === 'gpt-4o-mini');
    expect(chat.pricing).toEqual({
      inputPer1MTokens: expect.any(Number),
      cachedInputPer1MTokens: expect.any(Number),
      outputPer1MTokens: expect.any(Number),
    });
  });

  test('video models list allowedDurations: 4, 6, 8 s, and a reference-capable one (seedance) 4 to 15 s', async () => {
    const body = await json(await get('/v1/models', { authorization: `Bearer ${key}` }));
    const video = body.data.filter((m: any) => m.mode === 'video');
    expect(video.length).toBeGreaterThanOrEqual(2);
    for (const v of video) {
      expect(Number.isInteger(v.pricing.perVideoSecond)).toBe(true);
      expect(v.allowedDurations).toContain(v.defaultDuration);
    }
    expect(video.some((v: any) => JSON.stringify(v.allowedDurations) === '[4,6,8]')).toBe(true);
    const seedance = video.find((v: any) => v.family === 'seedance');
    expect(seedance.allowedDurations).toEqual([4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]);
  });

  test('GET /v1/models/{id}: one model; unknown model -> 404 model_not_found', async () => {
    const client = new OpenAI({ apiKey: key, baseURL: gw.url + '/v1', maxRetries: 0 });
    const m = await client.models.retrieve('gpt-4o-mini');
    expect(m).toMatchObject({ id: 'gpt-4o-mini', object: 'model', mode: 'chat' });
    const res = await get('/v1/models/nope', { authorization: `Bearer ${key}` });
    expect(res.status).toBe(404);
    const body = await json(res);
    expectOpenAIError(body, 'model_not_found');
    expect(body.error.param).toBe('model');
  });

  test('GET /public/models: the same price list without auth', async () => {
    const pub = await get('/public/models');
    expect(pub.status).toBe(200);
    const body = await json(pub);
    const authed = await json(await get('/v1/models', { authorization: `Bearer ${key}` }));
    expect(body.data.map((m: any) => [m.id, m.pricing])).toEqual(authed.data.map((m: any) => [m.id, m.pricing]));
  });
});

describe('errors', () => {
  let key: string;
  beforeAll(async () => {
    key = (await gw.account(1_000_000)).key;
  });
  const auth = () => ({ authorization: `Bearer ${key}` });

  test('invalid JSON -> 400 invalid_json', async () => {
    const res = await post('/v1/chat/completions', '{"model": "gpt-4o-mini", "messages": [', auth());
    expect(res.status).toBe(400);
    expectOpenAIError(await json(res), 'invalid_json');
  });

  test('a JSON body that is not an object -> 400', async () => {
    const res = await post('/v1/chat/completions', '[1,2,3]', auth());
    expect(res.status).toBe(400);
    expectOpenAIError(await json(res));
  });

  test('unknown route -> 404 in the OpenAI shape', async () => {
    for (const [method, path] of [
      ['GET', '/v1/nope'],
      ['POST', '/v1/chat/nope'],
      ['GET', '/nope'],
    ]) {
      const res = await fetch(gw.url + path, { method, headers: auth() });
      expect(res.status).toBe(404);
      expectOpenAIError(await json(res), 'unknown_url');
    }
  });

  test('unknown model on an operation -> 404 model_not_found', async () => {
    const res = await post(
      '/v1/chat/completions',
      JSON.stringify({ model: 'no-such-model', messages: [{ role: 'user', content: 'hi' }] }),
      auth(),
    );
    expect(res.status).toBe(404);
    expectOpenAIError(await json(res), 'model_not_found');
  });

  test('body over the limit -> 413', async () => {
    const big = JSON.stringify({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'x'.repeat(JSON_LIMIT * 2) }],
    });
    const res = await post('/v1/chat/completions', big, auth());
    expect(res.status).toBe(413);
    expectOpenAIError(await json(res), 'request_too_large');
  });

  test('wrong content type -> 415', async () => {
    const res = await post('/v1/chat/completions', 'model=gpt-4o-mini', {
      ...auth(),
      'content-type': 'application/x-www-form-urlencoded',
    });
    expect(res.status).toBe(415);
    expectOpenAIError(await json(res), 'unsupported_media_type');
    const none = await fetch(gw.url + '/v1/chat/completions', {
      method: 'POST',
      headers: auth(),
      body: new Uint8Array([123, 125]),
    });
    expect(none.status).toBe(415);
  });

  test('the SDK maps gateway errors to its typed errors', async () => {
    const client = new OpenAI({ apiKey: key, baseURL: gw.url + '/v1', maxRetries: 0 });
    await expect(
      client.chat.completions.create({ model: 'no-such-model', messages: [{ role: 'user', content: 'hi' }] }),
    ).rejects.toMatchObject({ status: 404, code: 'model_not_found', param: 'model' });
  });
});

describe('operability', () => {
  test('/healthz answers without touching dependencies', async () => {
    const res = await get('/healthz');
    expect(res.status).toBe(200);
    expect(await json(res)).toEqual({ status: 'ok' });
  });

  test('/readyz checks Postgres and Temporal', async () => {
    const res = await get('/readyz');
    expect(res.status).toBe(200);
    // ratelimit: informational (the in-process limiter here: no REDIS_URL), never a failing check.
    expect(await json(res)).toEqual({
      status: 'ready',
      checks: { postgres: 'ok', temporal: 'ok', ratelimit: 'memory' },
    });
  });

  test('/readyz is 503 when Temporal is not available', async () => {
    const noTemporal = await startGateway({ logLevel: 'warn' }, { temporal: false });
    try {
      const res = await fetch(noTemporal.url + '/readyz');
      expect(res.status).toBe(503);
      const body = await json(res);
      expect(body.status).toBe('not_ready');
      expect(body.checks.postgres).toBe('ok');
      expect(body.checks.temporal).not.toBe('ok');
    } finally {
      await noTemporal.close();
    }
  });

  test('x-request-id: generated when absent, echoed when given, replaced when unsafe', async () => {
    const a = await get('/healthz');
    expect(a.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    const b = await get('/healthz', { 'x-request-id': 'trace-abc.123' });
    expect(b.headers.get('x-request-id')).toBe('trace-abc.123');
    const c = await get('/healthz', { 'x-request-id': 'bad id\twith spaces' });
    expect(c.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    const err = await get('/v1/models');
    expect(err.status).toBe(401);
    expect(err.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });

  test('/metrics: Prometheus request counts and latency by route, method, status and model', async () => {
    const { key } = await gw.account(1_000_000);
    const client = new OpenAI({ apiKey: key, baseURL: gw.url + '/v1', maxRetries: 0 });
    await client.chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'metrics please' }],
    });
    await get('/v1/models/nope', { authorization: `Bearer ${key}` });
    // Requests are recorded when the response has been fully sent; read until both lines appear.
    const chatOk = 'route="/v1/chat/completions",method="POST",status="200",model="gpt-4o-mini"';
    const want = [
      new RegExp(`gateway_http_requests_total\\{${chatOk}\\} \\d+`),
      new RegExp(`gateway_http_request_duration_seconds_bucket\\{le="[^"]+",${chatOk}\\} \\d+`),
      /gateway_http_requests_total\{route="\/v1\/models\/:model",method="GET",status="404",model=""\} \d+/,
    ];
    let text = '';
    for (let i = 0; i < 20; i++) {
      const res = await get('/metrics');
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
      text = await res.text();
      if (want.every((w) => w.test(text))) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    for (const w of want) expect(text).toMatch(w);
    expect(text).toMatch(new RegExp(`gateway_http_request_duration_seconds_count\\{${chatOk}\\} [1-9]`));
  });
});
