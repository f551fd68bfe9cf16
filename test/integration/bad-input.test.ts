import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { startGateway, type TestGateway } from '../support/gateway';
import { getBalance, listLedger, verifyProjections } from '../../src/billing/ledger';
import { ConsoleClient, jsonOf, makeLogin } from '../e2e/consoleClient';
import { runAdmin } from '../../src/cli/admin';
import { post as postTo } from '../support/http';

/**
 * Inputs that would otherwise reach Postgres or the cost arithmetic unchecked: each is a 400 in the interface's error
 * shape naming the parameter, and holds or charges nothing. Text Postgres cannot store (NUL, unpaired surrogates) is
 * refused where it must be real text, and stored as U+FFFD where it is content (stored responses).
 */

let gw: TestGateway;
beforeAll(async () => {
  gw = await startGateway({ logLevel: 'silent' });
});
afterAll(async () => {
  await gw.close();
});

const BALANCE = 5_000_000;
const NUL = 'a\u0000b';
const LONE = 'a\ud800b';

/** POSTs `body` as JSON (JSON.stringify writes NUL and lone surrogates as \u escapes, as clients do). */
const post = (path: string, key: string, body: unknown, headers: Record<string, string> = {}) =>
  postTo(gw.url + path, body, { key, headers });

/** The account still has only its top-up: nothing held, nothing charged, projections consistent. */
async function expectUntouched(accountId: string) {
  await gw.deps.credit.flush();
  expect(await getBalance(gw.deps.db, accountId)).toEqual({ balance: BALANCE, held: 0, available: BALANCE });
  expect((await listLedger(gw.deps.db, accountId)).map((e) => e.kind)).toEqual(['topped_up']);
  expect(await verifyProjections(gw.deps.db)).toEqual([]);
}

const anthropic = { 'anthropic-version': '2023-06-01' };

describe('token counts beyond any model are a 400, on every path', () => {
  test.each([
    ['native (Anthropic upstream)', 'claude-sonnet-4-6'],
    ['translated to chat', 'gpt-4o-mini'],
    ['bridged to /responses', 'gpt-5-codex'],
  ])('/v1/messages max_tokens 1e20, %s', async (_name, model) => {
    const { accountId, key } = await gw.account(BALANCE);
    const res = await post(
      '/v1/messages',
      key,
      { model, max_tokens: 1e20, messages: [{ role: 'user', content: 'hi' }] },
      anthropic,
    );
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({
      type: 'error',
      error: { type: 'invalid_request_error', message: expect.stringContaining('max_tokens') },
    });
    await expectUntouched(accountId);
  });

  test.each([
    ['native (Responses upstream)', 'gpt-5-codex'],
    ['translated to chat', 'gpt-4o-mini'],
    ['bridged to /v1/messages', 'claude-sonnet-4-6'],
  ])('/v1/responses max_output_tokens 1e20, %s', async (_name, model) => {
    const { accountId, key } = await gw.account(BALANCE);
    const res = await post('/v1/responses', key, { model, max_output_tokens: 1e20, input: 'hi' });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ type: 'invalid_request_error', param: 'max_output_tokens' });
    await expectUntouched(accountId);
  });

  test('chat completions: max_tokens and n beyond any model', async () => {
    const { accountId, key } = await gw.account(BALANCE);
    for (const body of [{ max_tokens: 1e20 }, { max_completion_tokens: 1e20 }]) {
      const res = await post('/v1/chat/completions', key, {
        model: 'gpt-4o-mini',
        messages: [{ role: 'user', content: 'hi' }],
        ...body,
      });
      expect(res.status).toBe(400);
      expect(res.body.error.param).toBe(Object.keys(body)[0]);
    }
    await expectUntouched(accountId);
  });
});

describe('text Postgres cannot hold', () => {
  test.each([
    ['prompt with NUL', { prompt: NUL }, 'prompt'],
    ['prompt with a lone surrogate', { prompt: LONE }, 'prompt'],
    ['parameters value with NUL', { parameters: { negative_prompt: NUL } }, 'parameters.negative_prompt'],
    [
      'nested parameters value with a lone surrogate',
      { parameters: { style: { tags: ['ok', LONE] } } },
      'parameters.style.tags[1]',
    ],
    ['parameters key with NUL', { parameters: { [NUL]: 1 } }, 'parameters'],
    ['parameters key with a lone surrogate', { parameters: { [LONE]: 'x' } }, 'parameters'],
  ])('POST /v1/videos: %s is a 400 naming it', async (_name, fields, param) => {
    const { accountId, key } = await gw.account(BALANCE);
    const res = await post('/v1/videos', key, { model: 'seedance-2-0', prompt: 'a calm lake', seconds: 4, ...fields });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ type: 'invalid_request_error', param });
    const jobs = await gw.deps.db.query('SELECT 1 FROM video_jobs WHERE account_id = $1', [accountId]);
    expect(jobs.rowCount).toBe(0);
    await expectUntouched(accountId);
  });

  test('console: a sign-in email, a login email or a key name with NUL or a lone surrogate is a 400', async () => {
    const acc = await gw.account(0, 'console');
    const login = await makeLogin(gw, acc.accountId, 'operator');
    const c = new ConsoleClient(gw.url);
    for (const email of [`x${NUL}@example.com`, `x${LONE}@example.com`]) {
      const res = await c.signIn(email, 'some-password-123');
      expect(res.status).toBe(400);
      expect((await jsonOf(res)).error.param).toBe('email');
    }
    expect((await c.signIn(login.email, login.password)).status).toBe(200);
    for (const name of [NUL, LONE]) {
      const res = await c.request('POST', '/console/api/keys', { name });
      expect(res.status).toBe(400);
      expect((await jsonOf(res)).error.param).toBe('name');
      const created = await c.request('POST', '/console/api/admin/logins', {
        accountId: acc.accountId,
        email: `y${name}@example.com`,
        password: 'long-enough-password',
      });
      expect(created.status).toBe(400);
      expect((await jsonOf(created)).error.param).toBe('email');
    }
    expect((await c.json('GET', '/console/api/keys')).data.map((k: { name: string }) => k.name)).toEqual(['test']);
  });

  test('console usage: dates outside the years 1970..9999 are a 400', async () => {
    const acc = await gw.account(0, 'usage');
    const login = await makeLogin(gw, acc.accountId);
    const c = new ConsoleClient(gw.url);
    expect((await c.signIn(login.email, login.password)).status).toBe(200);
    for (const [from, to, param] of [
      ['0000-01-01', '0000-01-02', 'from'],
      ['0001-01-01', '0001-01-31', 'from'],
      ['1969-12-31', '1970-01-05', 'from'],
      ['2026-01-01', '0000-01-01', 'to'],
    ]) {
      const res = await c.request('GET', `/console/api/usage?from=${from}&to=${to}`);
      expect(res.status).toBe(400);
      expect((await jsonOf(res)).error.param).toBe(param);
    }
    const last = await c.request('GET', '/console/api/usage?from=9999-12-01&to=9999-12-31');
    expect(last.status).toBe(200);
  });
});

describe('store: true never claims a response it could not store', () => {
  test.each([
    ['translated', 'gpt-4o-mini'],
    ['native', 'gpt-5-codex'],
  ])('%s: input with a lone surrogate and a NUL (in text and in keys) is stored and found', async (_name, model) => {
    const { key } = await gw.account(BALANCE);
    const input = [
      { role: 'user', content: [{ type: 'input_text', text: `x${LONE}${NUL}` }], [`k${LONE}`]: `v${NUL}` },
    ];
    const res = await post('/v1/responses', key, { model, input, store: true });
    expect(res.status).toBe(200);
    expect(res.body.store).toBe(true);
    const got = await fetch(`${gw.url}/v1/responses/${res.body.id}`, { headers: { authorization: `Bearer ${key}` } });
    expect(got.status).toBe(200);
    expect((await jsonOf(got)).id).toBe(res.body.id);
    // The conversation continues from it (its input items were stored too).
    const next = await post('/v1/responses', key, { model, input: 'and then?', previous_response_id: res.body.id });
    expect(next.status).toBe(200);
  });
});

test.each(['gpt-4o-mini', 'gpt-5-codex'])(
  'when storing fails anyway (the table is gone), a non-streamed answer says store: false (%s)',
  async (model) => {
    const { key } = await gw.account(BALANCE);
    await gw.deps.db.query('ALTER TABLE stored_responses RENAME TO stored_responses_away');
    let res;
    try {
      res = await post('/v1/responses', key, { model, input: 'hi', store: true });
    } finally {
      await gw.deps.db.query('ALTER TABLE stored_responses_away RENAME TO stored_responses');
    }
    expect(res.status).toBe(200);
    expect(res.body.store).toBe(false);
    const got = await fetch(`${gw.url}/v1/responses/${res.body.id}`, { headers: { authorization: `Bearer ${key}` } });
    expect(got.status).toBe(404);
  },
);

test.each([
  ['a translated', 'gpt-4o-mini'],
  ['a native', 'gpt-5-codex'],
])('when storing fails in %s stream, its final event says store: false', async (kind, model) => {
  const { key } = await gw.account(BALANCE);
  await gw.deps.db.query('ALTER TABLE stored_responses RENAME TO stored_responses_away');
  let text: string;
  try {
    const res = await fetch(`${gw.url}/v1/responses`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify({ model, input: 'hi', store: true, stream: true }),
    });
    expect(res.status).toBe(200);
    text = await res.text();
  } finally {
    await gw.deps.db.query('ALTER TABLE stored_responses_away RENAME TO stored_responses');
  }
  const events = text
    .split('\n')
    .filter((l) => l.startsWith('data: {'))
    .map((l) => JSON.parse(l.slice(6)));
  const completed = events.find((e) => e.type === 'response.completed');
  expect(completed.response.store).toBe(false);
  if (kind === 'a native') {
    // Still a well-formed stream after the rewrite: every event once, in order, the cost comment after the last.
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_e, i) => i));
    expect(text).toMatch(/response\.completed[\s\S]*\n: x-gateway-cost-vnd=\d+/);
  }
  const got = await fetch(`${gw.url}/v1/responses/${completed.response.id}`, {
    headers: { authorization: `Bearer ${key}` },
  });
  expect(got.status).toBe(404);
});

describe('multipart field names that would nest too deep or reach a prototype', () => {
  const fixtures = path.join(__dirname, '../../emulator/fixtures');
  const png = new Blob([fs.readFileSync(path.join(fixtures, 'last_frame.png'))], { type: 'image/png' });
  const wav = new Blob([fs.readFileSync(path.join(fixtures, 'speech.wav'))], { type: 'audio/wav' });
  /** Valid forms of each multipart route, plus one more field if given. */
  const forms: Record<string, (extra?: [string, string]) => FormData> = {
    '/v1/videos': (extra) => formOf({ model: 'seedance-2-0', prompt: 'a calm lake', seconds: '4' }, extra),
    '/v1/images/edits': (extra) => formOf({ model: 'gpt-image-1', prompt: 'a hat' }, extra, ['image', png, 'a.png']),
    '/v1/audio/transcriptions': (extra) => formOf({ model: 'whisper-1' }, extra, ['file', wav, 'a.wav']),
  };
  function formOf(fields: Record<string, string>, extra?: [string, string], file?: [string, Blob, string]): FormData {
    const f = new FormData();
    for (const [k, v] of Object.entries(fields)) f.append(k, v);
    if (extra) f.append(...extra); // appended, not set as an object key: '__proto__' stays a name
    if (file) f.append(...file);
    return f;
  }
  const send = async (route: string, key: string, form: FormData) => {
    const res = await fetch(gw.url + route, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}` },
      body: form,
    });
    return { status: res.status, body: await jsonOf(res) };
  };
  afterEach(() => {
    // Should the test fail, the next ones still run clean.
    delete (Object.prototype as Record<string, unknown>).polluted;
  });

  test.each(Object.keys(forms))(
    "%s: the valid form is answered (so the 400s below are the names' doing)",
    async (route) => {
      const { key } = await gw.account(BALANCE);
      const res = await send(route, key, forms[route]());
      expect(res.status).toBeLessThan(300);
    },
  );

  test.each(
    Object.keys(forms).flatMap((route) =>
      ['__proto__[polluted]', 'constructor[prototype][polluted]', 'parameters[__proto__][polluted]', '__proto__'].map(
        (name) => [route, name],
      ),
    ),
  )('%s: a field named %s is a 400 and pollutes nothing', async (route, name) => {
    const { accountId, key } = await gw.account(BALANCE);
    const res = await send(route, key, forms[route]([name, 'yes']));
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({
      type: 'invalid_request_error',
      code: 'invalid_multipart',
      message: expect.stringContaining('forbidden key'),
    });
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.prototype).not.toHaveProperty('polluted');
    await expectUntouched(accountId);
  });

  test.each([65, 50_000])('POST /v1/videos: parameters nested %i brackets deep is a 400', async (depth) => {
    const { accountId, key } = await gw.account(BALANCE);
    const res = await send('/v1/videos', key, forms['/v1/videos'](['parameters' + '[a]'.repeat(depth), 'x']));
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({
      type: 'invalid_request_error',
      code: 'invalid_multipart',
      message: expect.stringContaining('64 levels'),
    });
    const jobs = await gw.deps.db.query('SELECT 1 FROM video_jobs WHERE account_id = $1', [accountId]);
    expect(jobs.rowCount).toBe(0);
    await expectUntouched(accountId);
  });
});

describe('console bodies: values are type-checked, never coerced', () => {
  test('a login whose email or password is an object that breaks String() is a 400 naming it', async () => {
    const acc = await gw.account(0, 'console-types');
    const op = await makeLogin(gw, acc.accountId, 'operator');
    const c = new ConsoleClient(gw.url);
    expect((await c.signIn(op.email, op.password)).status).toBe(200);
    const good = { accountId: acc.accountId, email: 'types@example.com', password: 'long-enough-password' };
    for (const [param, value] of [
      ['email', { toString: 1 }],
      ['password', { toString: 1 }],
      ['email', ['a@example.com']],
      ['password', 12345678901],
    ] as const) {
      const res = await c.request('POST', '/console/api/admin/logins', { ...good, [param]: value });
      expect(res.status).toBe(400);
      expect((await jsonOf(res)).error).toMatchObject({ type: 'invalid_request_error', param });
    }
    expect((await c.request('POST', '/console/api/admin/logins', good)).status).toBe(201);
  });

  test('an expiry outside 1970..9999 (UTC) is a 400 naming expiresAt, for customer, operator and CLI', async () => {
    const acc = await gw.account(0, 'expiry');
    const customer = new ConsoleClient(gw.url);
    const cl = await makeLogin(gw, acc.accountId);
    expect((await customer.signIn(cl.email, cl.password)).status).toBe(200);
    const operator = new ConsoleClient(gw.url);
    const ol = await makeLogin(gw, (await gw.account(0)).accountId, 'operator');
    expect((await operator.signIn(ol.email, ol.password)).status).toBe(200);
    const paths: [ConsoleClient, string][] = [
      [customer, `/console/api/keys/${acc.keyId}/limits`],
      [operator, `/console/api/admin/accounts/${acc.accountId}/keys/${acc.keyId}/limits`],
    ];
    const bad = [
      '0000-01-01',
      '0001-01-01T00:00:00Z',
      '1969-12-31T23:59:59Z',
      '9999-12-31T23:59:59-14:00',
      '+010000-01-01',
    ];
    for (const [client, p] of paths) {
      for (const expiresAt of bad) {
        const res = await client.request('PATCH', p, { expiresAt });
        expect(res.status).toBe(400);
        expect((await jsonOf(res)).error).toMatchObject({ type: 'invalid_request_error', param: 'expiresAt' });
      }
      expect((await client.json('PATCH', p, { expiresAt: '9999-12-31T23:59:59Z' })).expiresAt).toBe(
        '9999-12-31T23:59:59.000Z',
      );
    }
    for (const expires of ['0000-01-01', '9999-12-31T23:59:59-14:00']) {
      const err: string[] = [];
      const code = await runAdmin(['set-key-limits', acc.accountId, acc.keyId, '--expires', expires], {
        out: () => undefined,
        err: (l) => err.push(l),
        env: process.env,
      });
      expect(code).toBe(2);
      expect(err.join('\n')).toMatch(/--expires: expiresAt must lie in the years 1970 to 9999/);
    }
    const row = await gw.deps.db.query('SELECT expires_at FROM api_keys WHERE id = $1', [acc.keyId]);
    expect((row.rows[0].expires_at as Date).toISOString()).toBe('9999-12-31T23:59:59.000Z');
  });
});

describe('the batch APIs: text Postgres cannot hold, and methods no route takes', () => {
  /** Uploads a one-line chat batch file; its id. */
  async function uploadChatFile(key: string): Promise<string> {
    const body = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] };
    const line = { custom_id: 'a', method: 'POST', url: '/v1/chat/completions', body };
    const form = new FormData();
    form.append('purpose', 'batch');
    form.append('file', new Blob([JSON.stringify(line) + '\n']), 'in.jsonl');
    const res = await fetch(`${gw.url}/v1/files`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}` },
      body: form,
    });
    expect(res.status).toBe(200);
    return ((await res.json()) as { id: string }).id;
  }

  test("two file parts in an upload: the 400 names the route's limit (1), not the default (4)", async () => {
    const { key } = await gw.account(BALANCE);
    const line = JSON.stringify({
      custom_id: 'a',
      method: 'POST',
      url: '/v1/embeddings',
      body: { model: 'm', input: 'x' },
    });
    const form = new FormData();
    form.append('purpose', 'batch');
    form.append('file', new Blob([line]), 'a.jsonl');
    form.append('file', new Blob([line]), 'b.jsonl');
    const res = await fetch(`${gw.url}/v1/files`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}` },
      body: form,
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/at most 1\b/);
  });

  test.each([
    ['a metadata value with NUL', { a: NUL }, 'metadata.a'],
    ['a metadata value with a lone surrogate', { a: LONE }, 'metadata.a'],
    ['a metadata key with NUL', { [NUL]: 'x' }, 'metadata'],
    ['a metadata key with a lone surrogate', { [LONE]: 'x' }, 'metadata'],
  ])('POST /v1/batches: %s is a 400 naming it', async (_name, metadata, param) => {
    const { accountId, key } = await gw.account(BALANCE);
    const file = await uploadChatFile(key);
    const res = await post('/v1/batches', key, {
      input_file_id: file,
      endpoint: '/v1/chat/completions',
      completion_window: '24h',
      metadata,
    });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ type: 'invalid_request_error', param });
    await expectUntouched(accountId);
  });

  test('TRACE, PROPFIND and other methods no route takes: 405 method_not_allowed, never an error log', async () => {
    const errors = jest.spyOn(gw.deps.logger, 'error');
    const anthropicError = { type: 'error', error: { type: 'invalid_request_error' } };
    const openaiError = { type: 'invalid_request_error', code: 'method_not_allowed' };
    try {
      const u = new URL(gw.url);
      for (const method of ['TRACE', 'PROPFIND', 'MKCOL', 'LOCK', 'PURGE'])
        for (const [p, shape] of [
          ['/v1/batches', 'openai'],
          ['/v1/chat/completions', 'openai'],
          ['/v1/messages/batches', 'anthropic'],
          ['/no/such/path', 'openai'],
        ] as const) {
          const res = await new Promise<{ status: number; body: string }>((resolve, reject) => {
            const req = http.request({ host: u.hostname, port: u.port, method, path: p }, (r) => {
              let body = '';
              r.on('data', (c: Buffer) => (body += c.toString()));
              r.on('end', () => resolve({ status: r.statusCode ?? 0, body }));
            });
            req.on('error', reject);
            req.end();
          });
          const body = JSON.parse(res.body);
          expect([method, p, res.status]).toEqual([method, p, p === '/no/such/path' ? expect.any(Number) : 405]);
          expect(res.status).toBeLessThan(500);
          // Each interface's error shape: Anthropic's on /v1/messages*, OpenAI's (with its code) elsewhere.
          if (res.status === 405 && shape === 'anthropic') expect(body).toMatchObject(anthropicError);
          if (res.status === 405 && shape === 'openai') expect(body.error).toMatchObject(openaiError);
        }
      expect(errors).not.toHaveBeenCalled();
    } finally {
      errors.mockRestore();
    }
  });
});

describe('Claude text blocks whose text is not a string', () => {
  // An object with a toString of its own broke the token count (a 500); other values went upstream.
  const texts: [string, unknown][] = [
    ['an object with toString', { toString: 1 }],
    ['an object', {}],
    ['a number', 42],
    ['an array', ['a']],
    ['null', null],
  ];
  /** The request with `text` at one place a text block goes, and the parameter that names it. */
  const places: [string, (text: unknown) => Record<string, unknown>, string][] = [
    [
      'a message',
      (text) => ({ messages: [{ role: 'user', content: [{ type: 'text', text }] }] }),
      'messages[0].content[0].text',
    ],
    [
      'the system prompt',
      (text) => ({ system: [{ type: 'text', text }], messages: [{ role: 'user', content: 'hi' }] }),
      'system[0].text',
    ],
    [
      'a tool result',
      (text) => ({
        messages: [
          { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: [{ type: 'text', text }] }] },
        ],
      }),
      'messages[0].content[0].content[0].text',
    ],
  ];
  test.each([
    ['/v1/messages', 'claude-haiku-4-5'],
    ['/v1/messages', 'gpt-4o-mini'],
    ['/v1/messages/count_tokens', 'claude-haiku-4-5'],
    ['/v1/messages/count_tokens', 'gpt-4o-mini'],
  ])('%s on %s: a 400 in the Anthropic shape naming the field; nothing sent or charged', async (path, model) => {
    const { accountId, key } = await gw.account(BALANCE);
    const sent = gw.emulator.control.requests.length;
    for (const [what, text] of texts)
      for (const [where, body, param] of places) {
        const res = await post(path, key, { model, max_tokens: 10, ...body(text) }, anthropic);
        expect({ what, where, status: res.status, body: res.body }).toEqual({
          what,
          where,
          status: 400,
          body: {
            type: 'error',
            error: { type: 'invalid_request_error', message: expect.stringContaining(param) },
            request_id: expect.any(String),
          },
        });
      }
    expect(gw.emulator.control.requests.length).toBe(sent);
    await expectUntouched(accountId);
  });
});
