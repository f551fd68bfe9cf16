import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes, randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { startGateway, type TestGateway } from '../support/gateway';
import { createApp } from '../../src/app';
import { chargeHolds, placeHold, releaseHold } from '../../src/billing/ledger';
import { writeUsageBatch } from '../../src/billing/usageBatch';
import { tx } from '../../src/db/pool';
import { ConsoleClient, jsonOf, makeLogin } from '../e2e/consoleClient';
import { runConsoleUserCommand } from '../../src/cli/consoleUsers';

/**
 * The console's JSON API against the real gateway and Postgres: sign-in, sessions, CSRF, rate limiting, the
 * separation of console and API authentication, keys, balance, usage, jobs, media and operator actions.
 */
let gw: TestGateway;
beforeAll(async () => {
  gw = await startGateway({}, { temporal: false });
});
afterAll(async () => {
  await gw?.close();
});

async function customer(balance = 500_000) {
  const acc = await gw.account(balance, 'Console Customer');
  const login = await makeLogin(gw, acc.accountId);
  const c = new ConsoleClient(gw.url);
  expect((await c.signIn(login.email, login.password)).status).toBe(200);
  return { ...acc, ...login, c };
}

async function operator() {
  const acc = await gw.account(0, 'House');
  const login = await makeLogin(gw, acc.accountId, 'operator');
  const c = new ConsoleClient(gw.url);
  expect((await c.signIn(login.email, login.password)).status).toBe(200);
  return { ...acc, ...login, c };
}

async function insertJob(accountId: string, over: Record<string, unknown> = {}) {
  const id = randomUUID();
  const j = {
    status: 'completed',
    prompt: 'a red fox running through snow',
    seconds: 4,
    cost: 40_000,
    video_key: null as string | null,
    error: null as string | null,
    ...over,
  };
  await gw.deps.db.query(
    `INSERT INTO video_jobs (id, account_id, model, provider, status, request, request_hash, seconds, price_per_second,
       max_cost_vnd, hold_id, workflow_id, result_duration_seconds, cost_vnd, error_message, video_key, video_size,
       video_etag, completed_at)
     VALUES ($1, $2, 'veo-3-fast', 'veo', $3, $4, 'h', $5, 10000, 80000, $6, $7, $8, $9, $10, $11, $12, $13,
       CASE WHEN $3 = 'completed' THEN now() END)`,
    [
      id,
      accountId,
      j.status,
      JSON.stringify({ prompt: j.prompt, size: '1280x720' }),
      j.seconds,
      randomUUID(),
      `video-${id}`,
      j.status === 'completed' ? j.seconds : null,
      j.status === 'completed' ? j.cost : null,
      j.error,
      j.video_key,
      j.video_key ? 1000 : null,
      j.video_key ? '"e"' : null,
    ],
  );
  return id;
}

describe('sign-in and sessions', () => {
  test('the right password signs in with an HttpOnly SameSite cookie; wrong ones get one generic 401', async () => {
    const acc = await gw.account(0);
    const { email, password } = await makeLogin(gw, acc.accountId);
    const c = new ConsoleClient(gw.url);
    const wrong = await c.signIn(email, password + 'x');
    expect(wrong.status).toBe(401);
    const unknown = await c.signIn(`nobody-${randomUUID()}@example.com`, password);
    expect(unknown.status).toBe(401);
    expect((await jsonOf(unknown)).error.message).toBe((await jsonOf(wrong)).error.message);

    const ok = await c.signIn(email.toUpperCase(), password); // emails are case-insensitive
    expect(ok.status).toBe(200);
    const cookie = ok.headers.get('set-cookie')!;
    expect(cookie).toMatch(/^gw_console=[\w-]{43}; /);
    expect(cookie).toContain('HttpOnly');
    expect(cookie).toContain('SameSite=Strict');
    expect(cookie).toContain('Path=/console');
    expect(cookie).not.toContain('Secure');
    const me = await c.json('GET', '/console/api/session');
    expect(me.user).toMatchObject({ email, role: 'customer', accountId: acc.accountId });
    expect(me.csrfToken).toBe(c.csrf);
    // The database holds only a hash of the cookie's token.
    const token = c.cookie.split('=')[1];
    const rows = await gw.deps.db.query(
      `SELECT 1 FROM console_sessions WHERE token_hash = $1::bytea OR encode(token_hash, 'escape') = $2`,
      [Buffer.from(token), token],
    );
    expect(rows.rowCount).toBe(0);
  });

  test('the cookie is Secure when config.consoleSecureCookies is set', async () => {
    const app = createApp({ ...gw.deps, config: { ...gw.deps.config, consoleSecureCookies: true } });
    const server = http.createServer(app.callback());
    await new Promise<void>((res) => server.listen(0, '127.0.0.1', res));
    try {
      const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const acc = await gw.account(0);
      const { email, password } = await makeLogin(gw, acc.accountId);
      const res = await new ConsoleClient(base).signIn(email, password);
      expect(res.status).toBe(200);
      expect(res.headers.get('set-cookie')).toContain('; Secure');
    } finally {
      server.closeAllConnections();
      await new Promise<void>((res) => server.close(() => res()));
    }
  });

  test('sign-out ends the session server-side and clears the cookie', async () => {
    const { c } = await customer();
    const stolen = c.cookie;
    const out = await c.request('DELETE', '/console/api/session');
    expect(out.status).toBe(204);
    expect(out.headers.get('set-cookie')).toContain('Max-Age=0');
    const again = new ConsoleClient(gw.url);
    again.cookie = stolen;
    expect((await again.request('GET', '/console/api/session')).status).toBe(401);
    expect((await again.request('GET', '/console/api/keys')).status).toBe(401);
  });

  test('a disabled login cannot sign in and its sessions stop working', async () => {
    const { c, email, password } = await customer();
    await runConsoleUserCommand(gw.deps.db, 'disable-login', [email]);
    expect((await c.request('GET', '/console/api/keys')).status).toBe(401);
    expect((await new ConsoleClient(gw.url).signIn(email, password)).status).toBe(401);
    await runConsoleUserCommand(gw.deps.db, 'enable-login', [email]);
    expect((await new ConsoleClient(gw.url).signIn(email, password)).status).toBe(200);
  });

  test('sign-in attempts are rate-limited per email and IP; a success does not count', async () => {
    const acc = await gw.account(0);
    const { email, password } = await makeLogin(gw, acc.accountId);
    const c = new ConsoleClient(gw.url);
    expect((await c.signIn(email, password)).status).toBe(200);
    for (let i = 0; i < 5; i++) expect((await c.signIn(email, 'wrong-password')).status).toBe(401);
    const limited = await c.signIn(email, password); // even the right password waits now
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await jsonOf(limited)).error.code).toBe('too_many_attempts');
    // Another email from the same address is not locked out by this one's failures.
    const other = await makeLogin(gw, acc.accountId);
    expect((await new ConsoleClient(gw.url).signIn(other.email, other.password)).status).toBe(200);
  });

  test('missing fields are a 400 naming the parameter', async () => {
    const c = new ConsoleClient(gw.url);
    const res = await c.request('POST', '/console/api/session', { email: 'a@example.com' });
    expect(res.status).toBe(400);
    expect((await jsonOf(res)).error.param).toBe('password');
    const notJson = await fetch(gw.url + '/console/api/session', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'email=a&password=b',
    });
    expect(notJson.status).toBe(415);
  });
});

describe('CSRF protection', () => {
  test('state-changing requests need the session CSRF token', async () => {
    const { c } = await customer();
    const none = await c.request('POST', '/console/api/keys', { name: 'x' }, { 'x-csrf-token': '' });
    expect(none.status).toBe(403);
    expect((await jsonOf(none)).error.code).toBe('csrf_failed');
    const other = await customer();
    const foreign = await c.request('POST', '/console/api/keys', { name: 'x' }, { 'x-csrf-token': other.c.csrf });
    expect(foreign.status).toBe(403);
    const ok = await c.request('POST', '/console/api/keys', { name: 'x' });
    expect(ok.status).toBe(201);
  });

  test('a cross-origin request is refused even with the token; so is a cross-site sign-in', async () => {
    const { c, email, password } = await customer();
    const evil = await c.request('DELETE', '/console/api/session', undefined, { origin: 'https://evil.example' });
    expect(evil.status).toBe(403);
    expect((await c.request('GET', '/console/api/session')).status).toBe(200); // still signed in
    const site = await c.request(
      'POST',
      '/console/api/keys',
      { name: 'y' },
      { origin: '', 'sec-fetch-site': 'cross-site' },
    );
    expect(site.status).toBe(403);
    const login = await new ConsoleClient(gw.url).request(
      'POST',
      '/console/api/session',
      { email, password },
      { origin: 'https://evil.example' },
    );
    expect(login.status).toBe(403);
  });
});

describe('console and API authentication stay separate', () => {
  test('a console session never grants /v1 access', async () => {
    const { c } = await customer();
    const res = await fetch(gw.url + '/v1/models', { headers: { cookie: c.cookie } });
    expect(res.status).toBe(401);
    const acct = await fetch(gw.url + '/v1/account', { headers: { cookie: c.cookie, 'x-csrf-token': c.csrf } });
    expect(acct.status).toBe(401);
  });

  test('an API key never grants console access', async () => {
    const { key } = await gw.account(1000);
    expect((await fetch(gw.url + '/v1/models', { headers: { authorization: `Bearer ${key}` } })).status).toBe(200);
    for (const path of [
      '/console/api/session',
      '/console/api/keys',
      '/console/api/balance',
      '/console/api/admin/accounts',
    ]) {
      const res = await fetch(gw.url + path, { headers: { authorization: `Bearer ${key}`, 'x-api-key': key } });
      expect(res.status).toBe(401);
    }
    const create = await fetch(gw.url + '/console/api/keys', {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', origin: gw.url },
      body: '{"name":"k"}',
    });
    expect(create.status).toBe(401);
  });
});

describe('API keys', () => {
  test('create shows the full key once; list shows name, prefix, created, last used; revoke stops it', async () => {
    const { c } = await customer();
    const { key } = await c.json('POST', '/console/api/keys', { name: 'ci runner' });
    expect(key.key).toMatch(/^sk-gw-/);
    expect(key.key.startsWith(key.prefix)).toBe(true);
    const use = await fetch(gw.url + '/v1/models', { headers: { authorization: `Bearer ${key.key}` } });
    expect(use.status).toBe(200);

    const { data } = await c.json('GET', '/console/api/keys');
    const listed = data.find((k: any) => k.id === key.id);
    expect(listed).toMatchObject({ name: 'ci runner', prefix: key.prefix, revokedAt: null });
    expect(JSON.stringify(data)).not.toContain(key.key);
    expect(Date.parse(listed.createdAt)).not.toBeNaN();
    // last_used_at is written in the background after the first use.
    let lastUsed = null;
    for (let i = 0; i < 50 && !lastUsed; i++) {
      lastUsed = (await c.json('GET', '/console/api/keys')).data.find((k: any) => k.id === key.id).lastUsedAt;
      if (!lastUsed) await new Promise((r) => setTimeout(r, 100));
    }
    expect(lastUsed).not.toBeNull();

    expect((await c.json('DELETE', `/console/api/keys/${key.id}`)).revoked).toBe(true);
    expect((await c.request('DELETE', `/console/api/keys/${key.id}`)).status).toBe(404);
    let status = 200;
    for (let i = 0; i < 60 && status === 200; i++) {
      status = (await fetch(gw.url + '/v1/models', { headers: { authorization: `Bearer ${key.key}` } })).status;
      if (status === 200) await new Promise((r) => setTimeout(r, 100));
    }
    expect(status).toBe(401);
  });

  test("a customer cannot revoke another account's key; a nameless key is a 400 naming name", async () => {
    const a = await customer();
    const b = await gw.account(0);
    expect((await a.c.request('DELETE', `/console/api/keys/${b.keyId}`)).status).toBe(404);
    const res = await a.c.request('POST', '/console/api/keys', { name: '  ' });
    expect(res.status).toBe(400);
    expect((await jsonOf(res)).error.param).toBe('name');
    const bad = await a.c.request('DELETE', '/console/api/keys/not-a-uuid');
    expect(bad.status).toBe(400);
  });
});

describe('balance, ledger and usage', () => {
  test('balance and ledger with links from charges to requests and from holds to jobs; paging', async () => {
    const { c, accountId } = await customer(300_000);
    const reqId = randomUUID();
    const jobId = randomUUID();
    const db = gw.deps.db;
    // A charge for an API request (as the credit manager writes it) and a hold for a video job.
    const lease = randomUUID();
    await placeHold(db, {
      accountId,
      holdId: lease,
      amount: 20_000,
      idempotencyKey: `lease:${lease}:0`,
      refType: 'lease',
      refId: lease,
    });
    await chargeHolds(db, [
      {
        holdId: lease,
        amount: 1234,
        idempotencyKey: `req:${reqId}`,
        refType: 'request',
        refId: reqId,
        memo: 'chat gpt-4o-mini',
      },
    ]);
    await db.query(
      `INSERT INTO usage_records (id, account_id, model, operation, units, cost_vnd, latency_ms, status)
       VALUES ($1, $2, 'gpt-4o-mini', 'chat', '{"input_tokens": 10, "output_tokens": 20}', 1234, 42, 200)`,
      [reqId, accountId],
    );
    const hold = randomUUID();
    await placeHold(db, {
      accountId,
      holdId: hold,
      amount: 80_000,
      idempotencyKey: `video:${hold}`,
      refType: 'video_job',
      refId: jobId,
    });

    const b = await c.json('GET', '/console/api/balance');
    expect(b).toMatchObject({
      balance: 300_000 - 1234,
      held: 20_000 - 1234 + 80_000,
      available: 300_000 - 1234 - (20_000 - 1234) - 80_000,
    });
    const charge = b.ledger.find((e: any) => e.kind === 'charged');
    expect(charge.link).toEqual({ type: 'request', id: reqId });
    expect(b.ledger.find((e: any) => e.kind === 'hold_placed' && e.refType === 'video_job').link).toEqual({
      type: 'job',
      id: jobId,
    });
    expect(b.ledger.find((e: any) => e.kind === 'topped_up').link).toBeNull();
    // Requests settled together in one flush: one charge, pointing at the usage they itemise.
    const u = (cost: number) => ({
      usage: {
        id: randomUUID(),
        apiKeyId: null,
        model: 'gpt-4o-mini',
        operation: 'chat.completions',
        units: {},
        latencyMs: 1,
        status: 200,
      },
      accountId,
      holdId: lease,
      cost,
    });
    await tx(db, (cl) => writeUsageBatch(cl, [u(10), u(20)]));
    const batch = (await c.json('GET', '/console/api/balance')).ledger.find(
      (e: any) => e.kind === 'charged' && e.amount === 30,
    );
    expect(batch.link).toEqual({ type: 'usage', id: expect.any(String) });
    expect(batch.memo).toBe('2 requests: chat.completions gpt-4o-mini ×2');

    const r = await c.json('GET', `/console/api/requests/${reqId}`);
    expect(r).toMatchObject({
      id: reqId,
      model: 'gpt-4o-mini',
      costVnd: 1234,
      units: { input_tokens: 10, output_tokens: 20 },
    });
    const other = await customer();
    expect((await other.c.request('GET', `/console/api/requests/${reqId}`)).status).toBe(404);

    const page1 = await c.json('GET', '/console/api/balance?limit=2');
    expect(page1.ledger).toHaveLength(2);
    const page2 = await c.json('GET', `/console/api/balance?limit=2&before=${page1.nextBefore}`);
    expect(page2.ledger[0].id).toBeLessThan(page1.ledger[1].id);
    const bad = await c.request('GET', '/console/api/balance?limit=0');
    expect((await jsonOf(bad)).error.param).toBe('limit');
    // The job this hold names was never created: released, as the video reconciler would release it, so a later
    // verify-ledger over the shared database finds no hold outliving its job.
    await releaseHold(db, { holdId: hold, idempotencyKey: `video:${hold}:release` });
  });

  test("usage per day and model in the viewer's time zone, units summed; bad ranges are 400s", async () => {
    const { c, accountId } = await customer();
    const db = gw.deps.db;
    const ins = (at: string, model: string, units: object, cost: number) =>
      db.query(
        `INSERT INTO usage_records (id, account_id, model, operation, units, cost_vnd, latency_ms, status, created_at)
         VALUES ($1, $2, $3, 'chat', $4, $5, 10, 200, $6)`,
        [randomUUID(), accountId, model, JSON.stringify(units), cost, at],
      );
    // 2024-03-01 23:30 UTC is already 2024-03-02 in Ho Chi Minh City (UTC+7).
    await ins('2024-03-01T10:00:00Z', 'gpt-4o-mini', { input_tokens: 100, output_tokens: 50 }, 300);
    await ins('2024-03-01T11:00:00Z', 'gpt-4o-mini', { input_tokens: 10, output_tokens: 5 }, 30);
    await ins('2024-03-01T23:30:00Z', 'gpt-4o-mini', { input_tokens: 1, output_tokens: 1 }, 3);
    await ins('2024-03-01T12:00:00Z', 'tts-1', { characters: 1200 }, 900);
    await ins('2024-03-05T12:00:00Z', 'tts-1', { characters: 1 }, 1); // outside the range

    const u = await c.json('GET', '/console/api/usage?from=2024-03-01&to=2024-03-02&tz=Asia/Ho_Chi_Minh');
    expect(u.rows).toEqual([
      {
        day: '2024-03-01',
        model: 'gpt-4o-mini',
        requests: 2,
        costVnd: 330,
        units: { input_tokens: 110, output_tokens: 55 },
      },
      { day: '2024-03-01', model: 'tts-1', requests: 1, costVnd: 900, units: { characters: 1200 } },
      {
        day: '2024-03-02',
        model: 'gpt-4o-mini',
        requests: 1,
        costVnd: 3,
        units: { input_tokens: 1, output_tokens: 1 },
      },
    ]);
    const utc = await c.json('GET', '/console/api/usage?from=2024-03-01&to=2024-03-01&tz=UTC');
    expect(utc.rows.find((r: any) => r.model === 'gpt-4o-mini').requests).toBe(3);

    for (const [q, param] of [
      ['from=2024-3-1&to=2024-03-02', 'from'],
      ['from=2024-03-05&to=2024-03-01', 'from'],
      ['from=2020-01-01&to=2024-01-01', 'to'],
      ['from=2024-03-01&to=2024-03-02&tz=Mars/Olympus', 'tz'],
      ['to=2024-03-02', 'from'],
    ]) {
      const res = await c.request('GET', `/console/api/usage?${q}`);
      expect(res.status).toBe(400);
      expect((await jsonOf(res)).error.param).toBe(param);
    }
  });
});

describe('video jobs and media', () => {
  test('list with status filter, details, and the session-authenticated video route with Range', async () => {
    const { c, accountId } = await customer();
    const key = `videos/${randomUUID()}/video.mp4`;
    const bytes = Buffer.from(Array.from({ length: 1000 }, (_, i) => i % 256));
    await gw.deps.storage.put(key, Readable.from([bytes]), 'video/mp4');
    const done = await insertJob(accountId, { video_key: key });
    const failed = await insertJob(accountId, { status: 'failed', error: 'content policy violation' });
    const running = await insertJob(accountId, { status: 'processing' });

    const all = (await c.json('GET', '/console/api/jobs')).data;
    expect(all.map((j: any) => j.id).sort()).toEqual([done, failed, running].sort());
    const onlyFailed = (await c.json('GET', '/console/api/jobs?status=failed')).data;
    expect(onlyFailed.map((j: any) => j.id)).toEqual([failed]);
    expect(onlyFailed[0].error.message).toBe('content policy violation');
    const bad = await c.request('GET', '/console/api/jobs?status=done');
    expect((await jsonOf(bad)).error.param).toBe('status');

    const d = await c.json('GET', `/console/api/jobs/${done}`);
    expect(d).toMatchObject({
      id: done,
      status: 'completed',
      prompt: 'a red fox running through snow',
      model: 'veo-3-fast',
      durationSeconds: 4,
      costVnd: 40_000,
      hasVideo: true,
    });

    const full = await c.request('GET', `/console/media/jobs/${done}/video.mp4`);
    expect(full.status).toBe(200);
    expect(full.headers.get('content-type')).toBe('video/mp4');
    expect(Buffer.from(await full.arrayBuffer())).toEqual(bytes);
    const part = await c.request('GET', `/console/media/jobs/${done}/video.mp4`, undefined, { range: 'bytes=10-19' });
    expect(part.status).toBe(206);
    expect(part.headers.get('content-range')).toBe('bytes 10-19/1000');
    expect(Buffer.from(await part.arrayBuffer())).toEqual(bytes.subarray(10, 20));
    const past = await c.request('GET', `/console/media/jobs/${done}/video.mp4`, undefined, { range: 'bytes=1000-' });
    expect(past.status).toBe(416);
    expect(past.headers.get('content-range')).toBe('bytes */1000');
    expect((await jsonOf(past)).error.code).toBe('range_not_satisfiable');
    const etag = full.headers.get('etag')!;
    expect(
      (await c.request('GET', `/console/media/jobs/${done}/video.mp4`, undefined, { 'if-none-match': etag })).status,
    ).toBe(304);
    expect(full.headers.get('cache-control')).toBe('private, no-cache');
    const dl = await c.request('GET', `/console/media/jobs/${done}/video.mp4?download=1`);
    expect(dl.headers.get('content-disposition')).toContain('attachment');
    await dl.arrayBuffer();

    expect((await c.request('GET', `/console/media/jobs/${running}/video.mp4`)).status).toBe(409);
    expect((await fetch(`${gw.url}/console/media/jobs/${done}/video.mp4`)).status).toBe(401);
    const other = await customer();
    expect((await other.c.request('GET', `/console/media/jobs/${done}/video.mp4`)).status).toBe(404);
    expect((await other.c.request('GET', `/console/api/jobs/${done}`)).status).toBe(404);
    expect((await other.c.json('GET', '/console/api/jobs')).data).toEqual([]);
  });
});

describe('background responses', () => {
  // The rows below are written without their holds and charges (the page reads only the rows): they go when the
  // block ends, so a later verify-ledger over the shared database (test/integration/admin-cli.test.ts) sees real
  // responses only.
  const inserted: string[] = [];
  afterAll(async () => {
    await gw.deps.db.query('DELETE FROM background_responses WHERE id = ANY($1)', [inserted]);
  });

  /** A row as POST /v1/responses with background: true leaves it (the workflow's end fills cost and response). */
  async function insertResponse(accountId: string, over: Record<string, unknown> = {}) {
    const id = `resp_${randomBytes(24).toString('hex')}`;
    inserted.push(id);
    const r = {
      status: 'completed',
      cost: 1_234 as number | null,
      usage: null as unknown,
      error: null as unknown,
      ...over,
    };
    await gw.deps.db.query(
      `INSERT INTO background_responses (id, account_id, model, status, request, response, error, hold_id,
         max_cost_vnd, cost_vnd, workflow_id, deleted_at, ended_at)
       VALUES ($1, $2, 'gpt-4o-mini', $3, '{}', $4, $5, $6, 9000, $7, $8, $9,
         CASE WHEN $3 NOT IN ('queued', 'in_progress') THEN now() END)`,
      [
        id,
        accountId,
        r.status,
        r.usage ? JSON.stringify({ id, status: r.status, usage: r.usage }) : null,
        r.error ? JSON.stringify(r.error) : null,
        randomUUID(),
        r.cost,
        `bgresp-${id}`,
        over.deleted ? new Date() : null,
      ],
    );
    return id;
  }

  test("the account's own, newest first: status, model, cost (the bound while open), tokens, error", async () => {
    const { c, accountId } = await customer();
    const done = await insertResponse(accountId, { usage: { input_tokens: 12, output_tokens: 34, total_tokens: 46 } });
    const failed = await insertResponse(accountId, {
      status: 'failed',
      cost: 0,
      error: { code: 'server_error', message: 'emulator-openai answered 500' },
    });
    const running = await insertResponse(accountId, { status: 'in_progress', cost: null });
    await insertResponse(accountId, { deleted: true }); // deleted: never listed
    const other = await customer();
    const foreign = await insertResponse(other.accountId);

    const all = (await c.json('GET', '/console/api/responses')).data;
    expect(all.map((r: any) => r.id)).toEqual([running, failed, done]);
    expect(all[2]).toEqual({
      id: done,
      status: 'completed',
      model: 'gpt-4o-mini',
      costVnd: 1_234,
      maxCostVnd: 9000,
      inputTokens: 12,
      outputTokens: 34,
      error: null,
      createdAt: expect.any(String),
      endedAt: expect.any(String),
    });
    expect(all[0]).toMatchObject({ status: 'in_progress', costVnd: null, maxCostVnd: 9000, endedAt: null });
    // The error without catalog internals (the provider's id).
    expect(all[1].error).toEqual({ code: 'server_error', message: 'upstream answered 500' });
    const onlyFailed = (await c.json('GET', '/console/api/responses?status=failed')).data;
    expect(onlyFailed.map((r: any) => r.id)).toEqual([failed]);
    expect((await jsonOf(await c.request('GET', '/console/api/responses?status=done'))).error.param).toBe('status');

    // Another account sees only its own; no session, no list.
    expect((await other.c.json('GET', '/console/api/responses')).data.map((r: any) => r.id)).toEqual([foreign]);
    expect((await fetch(`${gw.url}/console/api/responses`)).status).toBe(401);
  });
});

describe('operator pages', () => {
  test('customers get 403 on operator routes', async () => {
    const { c } = await customer();
    for (const path of ['/console/api/admin/accounts', `/console/api/admin/accounts/${randomUUID()}/jobs`]) {
      expect((await c.request('GET', path)).status).toBe(403);
    }
    const res = await c.request('POST', `/console/api/admin/accounts/${randomUUID()}/topups`, {
      amount: 1,
      reason: 'x',
      idempotencyKey: 'abcdefgh',
    });
    expect(res.status).toBe(403);
  });

  test('a top-up with a reason is one ledger event per form submission; bad input changes nothing', async () => {
    const op = await operator();
    const cust = await customer(0);
    const idem = randomUUID();
    const first = await op.c.request('POST', `/console/api/admin/accounts/${cust.accountId}/topups`, {
      amount: 1_250_000,
      reason: 'bank transfer #42',
      idempotencyKey: idem,
    });
    expect(first.status).toBe(201);
    expect((await jsonOf(first)).applied).toBe(true);
    const again = await op.c.json('POST', `/console/api/admin/accounts/${cust.accountId}/topups`, {
      amount: 1_250_000,
      reason: 'bank transfer #42',
      idempotencyKey: idem,
    });
    expect(again.applied).toBe(false);
    expect(again.account.balance).toBe(1_250_000);

    for (const [body, param] of [
      [{ amount: 1.5, reason: 'x', idempotencyKey: randomUUID() }, 'amount'],
      [{ amount: '100', reason: 'x', idempotencyKey: randomUUID() }, 'amount'],
      [{ amount: -5, reason: 'x', idempotencyKey: randomUUID() }, 'amount'],
      [{ amount: 100, reason: '', idempotencyKey: randomUUID() }, 'reason'],
      [{ amount: 100, reason: 'x' }, 'idempotencyKey'],
    ] as const) {
      const res = await op.c.request('POST', `/console/api/admin/accounts/${cust.accountId}/topups`, body);
      expect(res.status).toBe(400);
      expect((await jsonOf(res)).error.param).toBe(param);
    }
    const b = await cust.c.json('GET', '/console/api/balance');
    expect(b.balance).toBe(1_250_000);
    const topups = b.ledger.filter((e: any) => e.kind === 'topped_up');
    expect(topups).toHaveLength(1);
    expect(topups[0].memo).toBe(`bank transfer #42 (by ${op.email})`);

    const list = (await op.c.json('GET', '/console/api/admin/accounts')).data;
    expect(list.find((a: any) => a.id === cust.accountId)).toMatchObject({
      balance: 1_250_000,
      held: 0,
      available: 1_250_000,
      logins: 1,
    });
  });

  test('operator creates an account and a login; the customer signs in; duplicates, weak passwords fail', async () => {
    const op = await operator();
    const acc = await op.c.json('POST', '/console/api/admin/accounts', { name: 'Công ty ABC' });
    expect(acc).toMatchObject({ name: 'Công ty ABC', balance: 0 });
    const email = `new-${randomUUID().slice(0, 8)}@example.com`;
    const login = await op.c.request('POST', '/console/api/admin/logins', {
      accountId: acc.id,
      email,
      password: 'correct horse battery',
      role: 'customer',
    });
    expect(login.status).toBe(201);
    const dup = await op.c.request('POST', '/console/api/admin/logins', {
      accountId: acc.id,
      email: email.toUpperCase(),
      password: 'correct horse battery',
    });
    expect(dup.status).toBe(409);
    const weak = await op.c.request('POST', '/console/api/admin/logins', {
      accountId: acc.id,
      email: `w-${email}`,
      password: 'short',
    });
    expect((await jsonOf(weak)).error.param).toBe('password');
    const noAcc = await op.c.request('POST', '/console/api/admin/logins', {
      accountId: randomUUID(),
      email: `x-${email}`,
      password: 'correct horse battery',
    });
    expect(noAcc.status).toBe(404);
    const c = new ConsoleClient(gw.url);
    expect((await c.signIn(email, 'correct horse battery')).status).toBe(200);
    expect((await c.json('GET', '/console/api/session')).user.accountName).toBe('Công ty ABC');
    const detail = await op.c.json('GET', `/console/api/admin/accounts/${acc.id}`);
    expect(detail.logins.map((u: any) => u.email)).toEqual([email]);
  });

  test("a customer's jobs link to their workflows in the Temporal UI", async () => {
    const op = await operator();
    const cust = await gw.account(0);
    const jobId = await insertJob(cust.accountId, { status: 'processing' });
    const { data } = await op.c.json('GET', `/console/api/admin/accounts/${cust.accountId}/jobs`);
    expect(data).toHaveLength(1);
    const cfg = gw.deps.config;
    expect(data[0].temporalUrl).toBe(
      `${cfg.temporalUiUrl}/namespaces/${cfg.temporalNamespace}/workflows/video-${jobId}`,
    );
  });
});

describe('CLI section', () => {
  test('create-login generates and prints a password that signs in; set-password replaces it', async () => {
    const acc = await gw.account(0);
    const email = `cli-${randomUUID().slice(0, 8)}@example.com`;
    const out = await runConsoleUserCommand(gw.deps.db, 'create-login', [acc.accountId, email, '--operator'], {});
    expect(out[0]).toContain('operator login');
    const pw = out.find((l) => l.startsWith('password: '))!.slice('password: '.length);
    const c = new ConsoleClient(gw.url);
    expect((await c.signIn(email, pw)).status).toBe(200);
    expect((await c.json('GET', '/console/api/session')).user.role).toBe('operator');
    await runConsoleUserCommand(gw.deps.db, 'set-password', [email, '--password', 'a brand new password'], {});
    expect((await c.request('GET', '/console/api/session')).status).toBe(401); // sessions ended
    expect((await new ConsoleClient(gw.url).signIn(email, 'a brand new password')).status).toBe(200);
    const listed = await runConsoleUserCommand(gw.deps.db, 'list-logins', [acc.accountId], {});
    expect(listed).toEqual([expect.stringContaining(`${email}\toperator\t${acc.accountId}`)]);
    await expect(runConsoleUserCommand(gw.deps.db, 'create-login', [acc.accountId], {})).rejects.toThrow(/usage/);
  });
});

describe('static files', () => {
  test('the app shell for every page, assets with ETags, a strict CSP, and JSON 404s under /console/api', async () => {
    for (const path of ['/console/', '/console/keys', `/console/jobs/${randomUUID()}`]) {
      const res = await fetch(gw.url + path);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toContain('text/html');
      expect(res.headers.get('content-security-policy')).toContain("script-src 'self'");
      expect(await res.text()).toContain('/console/static/app.js');
    }
    const js = await fetch(gw.url + '/console/static/app.js');
    expect(js.headers.get('content-type')).toContain('javascript');
    const etag = js.headers.get('etag')!;
    // (node:http, because fetch adds Cache-Control: no-cache to conditional requests, which forbids a 304)
    const revalidated = await new Promise<number>((res, rej) => {
      http
        .get(gw.url + '/console/static/app.js', { headers: { 'if-none-match': etag } }, (r) => {
          r.resume();
          res(r.statusCode!);
        })
        .on('error', rej);
    });
    expect(revalidated).toBe(304);
    expect((await fetch(gw.url + '/console/static/nope.js')).status).toBe(404);
    const api404 = await fetch(gw.url + '/console/api/nothing');
    expect(api404.status).toBe(404);
    expect((await jsonOf(api404)).error).toBeDefined();
    const root = await fetch(gw.url + '/', { redirect: 'manual' });
    expect(root.headers.get('location')).toBe('/console/');
  });
});

test("operators see an account's uncollected bills: the total, each request's charge and shortfall", async () => {
  const op = await operator();
  const cust = await gw.account(100);
  const db = gw.deps.db;
  const lease = randomUUID();
  await placeHold(db, {
    accountId: cust.accountId,
    holdId: lease,
    amount: 50,
    idempotencyKey: `lease:${lease}:0`,
    refType: 'lease',
    refId: lease,
  });
  // Billed 550 VND by its usage, 50 covered by its lease: the account's other 50 are collected, 450 are not.
  const id = randomUUID();
  const usage = { id, apiKeyId: null, model: 'gpt-image-1', operation: 'images.generations', units: { images: 1 } };
  await tx(db, (cl) =>
    writeUsageBatch(cl, [
      {
        usage: { ...usage, latencyMs: 1, status: 200, pricing: { perImage: 550 } },
        accountId: cust.accountId,
        holdId: lease,
        cost: 50,
        excess: 500,
      },
    ]),
  );
  const detail = await op.c.json('GET', `/console/api/admin/accounts/${cust.accountId}`);
  expect(detail.balance).toBe(0);
  expect(detail.uncollected).toEqual({
    totalVnd: 450,
    requests: 1,
    rows: [expect.objectContaining({ id, model: 'gpt-image-1', costVnd: 100, shortfallVnd: 450 })],
  });
  expect(detail.ledger.find((e: any) => e.kind === 'uncollected')).toMatchObject({ amount: 450, refId: id });
  expect((await op.c.json('GET', `/console/api/admin/accounts/${op.accountId}`)).uncollected.requests).toBe(0);
});
