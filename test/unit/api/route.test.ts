import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';
import { apiRoutes } from '../../../src/api/route';
import { errorHandler, type GatewayState } from '../../../src/api/middleware';
import { dispatchByPrefix } from '../../../src/api/dispatch';
import { uploadedFile } from '../../../src/api/uploads';
import { MemoryRateLimiter } from '../../../src/limits/rateLimiter';
import { createLogger } from '../../../src/observability/logger';
import { badRequest } from '../../../src/errors';
import type { Principal } from '../../../src/auth/apiKeys';

// The route builder on a real Koa app, its error handler and the prefix dispatch, over real HTTP: the order of its
// checks (key before body, anthropic-version after the key), each shape's errors, credentials and rate-limit
// headers, JSON and multipart bodies, the schema, and the temp files of a form gone once the handler has run.
// Keys are resolved by a stand-in for the Postgres lookup (the integration tests run the real one).

const principal = (keyId: string, rpm: number | null): Principal => ({
  accountId: 'acct-1',
  keyId,
  limits: { rpm, tpm: null, budgetDayVnd: null, budgetMonthVnd: null },
  expiresAt: null,
  budgetFenceAt: null,
  fetchedAt: Date.now(),
});
const KEYS: Record<string, Principal> = { 'sk-good': principal('key-1', null), 'sk-limited': principal('key-2', 60) };
const limiter = new MemoryRateLimiter();
const deps = {
  keys: { resolve: async (k: string) => KEYS[k] ?? null },
  adminKeys: { resolve: async () => null },
  limiter,
} as never;

interface Chat {
  model: string;
}
function validateChat(body: unknown): asserts body is Chat {
  if (typeof (body as Chat).model !== 'string') throw badRequest("Missing required parameter: 'model'.", 'model');
}

const seen: { route?: string; files: string[]; failures: number } = { files: [], failures: 0 };
let server: http.Server;
let base = '';

beforeAll(async () => {
  const openai = apiRoutes(deps, { shape: 'openai' })
    .add({
      method: 'POST',
      path: '/v1/things',
      body: { json: 1024 },
      validate: validateChat,
      handler: (ctx, body) => {
        seen.route = ctx.state.route;
        ctx.body = { model: body.model, account: ctx.state.principal?.accountId };
      },
    })
    .add({
      method: 'POST',
      path: '/v1/forms',
      body: { multipart: 1024, onFailure: async () => void seen.failures++ },
      handler: (ctx, fields) => {
        const f = uploadedFile(ctx, 'file');
        if (f) seen.files.push(f.filepath);
        if ((fields as { fail?: string }).fail) throw badRequest('refused', 'fail');
        ctx.body = { fields, file: f ? fs.readFileSync(f.filepath, 'utf8') : null };
      },
    })
    .add({
      method: 'POST',
      path: '/v1/either',
      body: { json: 1024, multipart: 1024 },
      handler: (ctx, body) => {
        ctx.body = { form: Boolean(ctx.is('multipart/form-data')), body };
      },
    })
    .add({
      method: 'GET',
      path: '/v1/open',
      auth: 'none',
      handler: (ctx) => {
        ctx.body = { principal: ctx.state.principal ?? null };
      },
    });
  const anthropic = apiRoutes(deps, { shape: 'anthropic' }).add({
    method: 'POST',
    path: '/v2/messages',
    body: { json: 1024 },
    handler: (ctx) => {
      ctx.body = { ok: true };
    },
  });
  const gemini = apiRoutes(deps, { shape: 'gemini' }).add({
    method: 'GET',
    path: '/v2beta/models/:model',
    handler: (ctx) => {
      if (ctx.params.model === 'missing') throw badRequest('no such model', null);
      ctx.body = { name: ctx.params.model };
    },
  });
  const app = new Koa<GatewayState>();
  app.silent = true;
  app.use(errorHandler({ logger: createLogger('silent'), catalog: { providers: new Map(), models: [] } as never }));
  app.use(dispatchByPrefix([openai.router, anthropic.router, gemini.router]));
  server = http.createServer(app.callback());
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

async function call(path: string, init: RequestInit = {}) {
  const res = await fetch(base + path, init);
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : null };
}
const json = (body: unknown, headers: Record<string, string> = {}): RequestInit => ({
  method: 'POST',
  headers: { 'content-type': 'application/json', ...headers },
  body: typeof body === 'string' ? body : JSON.stringify(body),
});

test('a JSON route: key, then body, then schema, then the handler with the typed body, the route label', async () => {
  // The key is checked before the body is read: a malformed body without a key is a 401.
  const noKey = await call('/v1/things', json('{not json'));
  expect(noKey.status).toBe(401);
  expect(noKey.body.error.code).toBe('missing_api_key');
  const auth = { authorization: 'Bearer sk-good' };
  expect((await call('/v1/things', json('{not json', auth))).body.error.code).toBe('invalid_json');
  const wrongType = await call('/v1/things', { method: 'POST', headers: { ...auth, 'content-type': 'text/plain' } });
  expect([wrongType.status, wrongType.body.error.code]).toEqual([415, 'unsupported_media_type']);
  expect((await call('/v1/things', json('x'.repeat(2000), auth))).status).toBe(413);
  const invalid = await call('/v1/things', json({}, auth));
  expect([invalid.status, invalid.body.error.param]).toEqual([400, 'model']);
  const ok = await call('/v1/things', json({ model: 'm' }, auth));
  expect(ok).toMatchObject({ status: 200, body: { model: 'm', account: 'acct-1' } });
  expect(seen.route).toBe('/v1/things');
});

test("a key's rate-limit headers come with its answers, errors too, in its shape", async () => {
  const headers = { authorization: 'Bearer sk-limited' };
  const ok = await call('/v1/things', json({ model: 'm' }, headers));
  expect(ok.headers.get('x-ratelimit-limit-requests')).toBe('60');
  const refused = await call('/v1/things', json({}, headers));
  expect(refused.status).toBe(400);
  expect(refused.headers.get('x-ratelimit-limit-requests')).toBe('60');
  const anthropic = await call(
    '/v2/messages',
    json({}, { 'x-api-key': 'sk-limited', 'anthropic-version': '2023-06-01' }),
  );
  expect(anthropic.status).toBe(200);
  expect(anthropic.headers.get('anthropic-ratelimit-requests-limit')).toBe('60');
  expect(anthropic.headers.get('x-ratelimit-limit-requests')).toBeNull();
});

test('the Anthropic shape: its errors, and its anthropic-version header required after the key', async () => {
  const noKey = await call('/v2/messages', json({}));
  expect(noKey.status).toBe(401);
  expect(noKey.body).toMatchObject({ type: 'error', error: { type: 'authentication_error' } });
  const noVersion = await call('/v2/messages', json('{not json', { 'x-api-key': 'sk-good' }));
  expect([noVersion.status, noVersion.body.error.message]).toEqual([
    400,
    'anthropic-version: header is required (for example "anthropic-version: 2023-06-01").',
  ]);
  const badVersion = await call('/v2/messages', json({}, { 'x-api-key': 'sk-good', 'anthropic-version': 'latest' }));
  expect(badVersion.status).toBe(400);
  expect(badVersion.body.type).toBe('error');
});

test("the Gemini shape: Google's error body, and the key from x-goog-api-key or ?key=", async () => {
  const noKey = await call('/v2beta/models/m');
  expect(noKey.status).toBe(401);
  expect(noKey.body.error).toMatchObject({ code: 401, status: 'UNAUTHENTICATED' });
  expect((await call('/v2beta/models/m?key=sk-good')).body).toEqual({ name: 'm' });
  expect((await call('/v2beta/models/m', { headers: { 'x-goog-api-key': 'sk-good' } })).body).toEqual({ name: 'm' });
  const missing = await call('/v2beta/models/missing?key=sk-good');
  expect(missing.body.error).toMatchObject({ code: 400, status: 'INVALID_ARGUMENT', message: 'no such model' });
  // OpenAI's routes take no key from the query string.
  expect((await call('/v1/open?key=sk-good')).body).toEqual({ principal: null });
});

function form(fields: Record<string, string>, file?: string): RequestInit {
  const fd = new FormData();
  for (const [k, v] of Object.entries(fields)) fd.append(k, v);
  if (file !== undefined) fd.append('file', new Blob([file]), 'a.txt');
  return { method: 'POST', headers: { authorization: 'Bearer sk-good' }, body: fd };
}

test('a multipart route: fields and files to the handler, its temp files removed after, failures told', async () => {
  const ok = await call('/v1/forms', form({ purpose: 'x' }, 'hello'));
  expect(ok).toMatchObject({ status: 200, body: { fields: { purpose: 'x' }, file: 'hello' } });
  const failed = await call('/v1/forms', form({ fail: '1' }, 'bye'));
  expect(failed.status).toBe(400);
  expect(seen.files).toHaveLength(2);
  for (const f of seen.files) expect(fs.existsSync(f)).toBe(false);
  expect(seen.failures).toBe(1);
  const tooLarge = await call('/v1/forms', form({}, 'x'.repeat(4096)));
  expect([tooLarge.status, tooLarge.body.error.code]).toEqual([413, 'file_too_large']);
  expect(seen.failures).toBe(2);
  const notForm = await call('/v1/forms', json({}, { authorization: 'Bearer sk-good' }));
  expect([notForm.status, notForm.body.error.code]).toEqual([415, 'unsupported_media_type']);
});

test('a route taking JSON or a form reads each by its Content-Type', async () => {
  const asJson = await call('/v1/either', json({ a: 1 }, { authorization: 'Bearer sk-good' }));
  expect(asJson.body).toEqual({ form: false, body: { a: 1 } });
  const asForm = await call('/v1/either', form({ a: '1' }));
  expect(asForm.body).toEqual({ form: true, body: { a: '1' } });
});

test('a route without a key needs none', async () => {
  expect(await call('/v1/open')).toMatchObject({ status: 200, body: { principal: null } });
});
