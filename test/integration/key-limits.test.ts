import { randomUUID } from 'node:crypto';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { startGateway, type TestGateway } from '../support/gateway';
import { setKeyLimits, setAccountLimits } from '../../src/limits/keyLimits';
import { createApiKey, KeyResolver } from '../../src/auth/apiKeys';
import { getBalance, verifyProjections } from '../../src/billing/ledger';
import { keySpend } from '../../src/billing/budget';
import { eventually } from '../support/video';

/**
 * Per-key rate limits and budgets through the real gateway (real Postgres, Redis and emulator over HTTP), with the
 * shared Redis limiter (a key prefix of this run's own) and with the in-process one.
 */

const modes: [string, string | null][] = [
  ['redis', 'redis://127.0.0.1:6379'],
  ['memory', null],
];

describe.each(modes)('rate limits (%s limiter)', (mode, redisUrl) => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startGateway(
      { redisUrl, redisKeyPrefix: `gw-test:${randomUUID()}:`, logLevel: 'silent' },
      { temporal: false },
    );
    if (redisUrl) await (gw.deps.limiter as unknown as { ready(): Promise<boolean> }).ready();
  });
  afterAll(() => gw.close());

  const chat = (key: string, max = 20) =>
    new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0 }).chat.completions
      .create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], max_tokens: max })
      .withResponse();

  test('RPM: exactly the limit admitted, the rest 429 rate_limit_exceeded with Retry-After, uncharged', async () => {
    expect(gw.deps.limiter.mode).toBe(mode);
    const { accountId, key, keyId } = await gw.account(1_000_000);
    await setKeyLimits(gw.deps.db, accountId, keyId, { rpm: 5 });
    const upstreamBefore = gw.emulator.control.requests.length;
    const results = await Promise.allSettled(Array.from({ length: 12 }, () => chat(key)));
    const ok = results.filter((r) => r.status === 'fulfilled') as PromiseFulfilledResult<
      Awaited<ReturnType<typeof chat>>
    >[];
    const refused = results.filter((r) => r.status === 'rejected').map((r) => (r as PromiseRejectedResult).reason);
    expect(ok).toHaveLength(5);
    expect(refused).toHaveLength(7);
    for (const e of refused) {
      expect(e).toBeInstanceOf(OpenAI.RateLimitError);
      expect(e.status).toBe(429);
      expect(e.code).toBe('rate_limit_exceeded');
      expect(Number(e.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(e.headers.get('x-ratelimit-limit-requests')).toBe('5');
      expect(e.headers.get('x-ratelimit-remaining-requests')).toBe('0');
    }
    const remaining = ok.map((r) => Number(r.value.response.headers.get('x-ratelimit-remaining-requests'))).sort();
    expect(remaining).toEqual([0, 1, 2, 3, 4]);
    expect(ok[0].value.response.headers.get('x-ratelimit-reset-requests')).toMatch(/^(\d+m)?\d+(\.\d+)?s$|^\d+ms$/);
    expect(gw.emulator.control.requests.length - upstreamBefore).toBe(5);
    await gw.deps.credit.flush();
    const rows = await gw.deps.db.query('SELECT count(*)::int AS n FROM usage_records WHERE account_id = $1', [
      accountId,
    ]);
    expect(rows.rows[0].n).toBe(5);
  });

  test('tokens per minute: counted from the reservation bound, corrected to actual tokens when settled', async () => {
    const { accountId, key, keyId } = await gw.account(1_000_000);
    await setKeyLimits(gw.deps.db, accountId, keyId, { tpm: 2_000 });
    // The bound: prompt <= request bytes, output <= max_tokens (1000). Two such bounds do not fit in 2000 at once.
    const first = await chat(key, 1_000);
    const used = first.data.usage!.total_tokens;
    expect(first.response.headers.get('x-ratelimit-limit-tokens')).toBe('2000');
    const boundRemaining = Number(first.response.headers.get('x-ratelimit-remaining-tokens'));
    expect(boundRemaining).toBeLessThan(1_000); // the whole bound was counted while the request ran
    // After settlement the window holds only the tokens actually used (Redis gets corrections in batches every
    // few ms), so a second large request fits.
    await eventually(async () => (await gw.deps.limiter.usage([keyId])).get(keyId)!.tokens === used);
    const second = await chat(key, 1_000);
    const afterSecond = Number(second.response.headers.get('x-ratelimit-remaining-tokens'));
    expect(afterSecond).toBe(boundRemaining - used);
    // Concurrent requests' corrections (batched per key) leave exactly their actual tokens in the window.
    await eventually(async () => (await gw.deps.limiter.usage([keyId])).get(keyId)!.tokens === 2 * used);
    const more = await Promise.all(Array.from({ length: 4 }, () => chat(key, 100)));
    const total = 2 * used + more.reduce((t, r) => t + r.data.usage!.total_tokens, 0);
    await eventually(async () => (await gw.deps.limiter.usage([keyId])).get(keyId)!.tokens === total);
    // A request whose bound alone exceeds the TPM can never fit: 429 without Retry-After.
    const tooLarge = await chat(key, 5_000).catch((e) => e);
    expect(tooLarge.status).toBe(429);
    expect(tooLarge.code).toBe('rate_limit_exceeded');
    expect(tooLarge.message).toMatch(/Request too large/);
  });

  test('/v1/messages carries the Anthropic rate-limit headers and refuses in the Anthropic shape', async () => {
    const { accountId, key, keyId } = await gw.account(1_000_000);
    await setKeyLimits(gw.deps.db, accountId, keyId, { rpm: 1, tpm: 100_000 });
    const a = new Anthropic({ apiKey: key, baseURL: gw.url, maxRetries: 0 });
    const ok = await a.messages
      .create({ model: 'claude-haiku-4-5', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] })
      .withResponse();
    expect(ok.response.headers.get('anthropic-ratelimit-requests-limit')).toBe('1');
    expect(ok.response.headers.get('anthropic-ratelimit-requests-remaining')).toBe('0');
    expect(ok.response.headers.get('anthropic-ratelimit-tokens-limit')).toBe('100000');
    expect(Date.parse(ok.response.headers.get('anthropic-ratelimit-requests-reset')!)).toBeGreaterThan(
      Date.now() - 1000,
    );
    expect(ok.response.headers.get('x-ratelimit-limit-requests')).toBeNull();
    const e = await a.messages
      .create({ model: 'claude-haiku-4-5', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] })
      .catch((x) => x);
    expect(e).toBeInstanceOf(Anthropic.RateLimitError);
    expect(e.error).toMatchObject({ type: 'error', error: { type: 'rate_limit_error' } });
    expect(Number(e.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  });

  test('streams (chat, messages, responses) carry the rate-limit headers too', async () => {
    const { accountId, key, keyId } = await gw.account(1_000_000);
    await setKeyLimits(gw.deps.db, accountId, keyId, { rpm: 100, tpm: 1_000_000 });
    const openai = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const chatStream = await openai.chat.completions
      .create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], max_tokens: 20, stream: true })
      .withResponse();
    for await (const _ of chatStream.data) {
      /* drain */
    }
    expect(chatStream.response.headers.get('x-ratelimit-limit-requests')).toBe('100');
    expect(chatStream.response.headers.get('x-ratelimit-remaining-tokens')).toMatch(/^\d+$/);
    const resp = await openai.responses.create({ model: 'gpt-4o-mini', input: 'hi', stream: true }).withResponse();
    for await (const _ of resp.data) {
      /* drain */
    }
    expect(resp.response.headers.get('x-ratelimit-remaining-requests')).toBe('98');
    const msg = await new Anthropic({ apiKey: key, baseURL: gw.url, maxRetries: 0 }).messages
      .create({ model: 'claude-haiku-4-5', max_tokens: 20, stream: true, messages: [{ role: 'user', content: 'hi' }] })
      .withResponse();
    for await (const _ of msg.data) {
      /* drain */
    }
    expect(msg.response.headers.get('anthropic-ratelimit-requests-remaining')).toBe('97');
  });

  test('every response after authentication carries the headers (GETs, 400s, 404s) without counting', async () => {
    const { accountId, key, keyId } = await gw.account(1_000_000);
    await setKeyLimits(gw.deps.db, accountId, keyId, { rpm: 5, tpm: 10_000 });
    const openai = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const models = await openai.models.list().withResponse();
    expect(models.response.headers.get('x-ratelimit-limit-requests')).toBe('5');
    expect(models.response.headers.get('x-ratelimit-remaining-requests')).toBe('5');
    expect(models.response.headers.get('x-ratelimit-limit-tokens')).toBe('10000');
    expect(models.response.headers.get('x-ratelimit-remaining-tokens')).toBe('10000');
    expect(models.response.headers.get('x-ratelimit-reset-requests')).toBe('0ms');
    const ok = await chat(key, 50);
    expect(ok.response.headers.get('x-ratelimit-remaining-requests')).toBe('4');
    const used = ok.data.usage!.prompt_tokens + ok.data.usage!.completion_tokens;
    // A validation error (400), an unknown model (404), a GET: the window as it stands, this request not counted.
    const bad = await openai.chat.completions.create({ model: 'gpt-4o-mini', messages: 'hi' as never }).catch((x) => x);
    expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
    const unknown = await openai.chat.completions
      .create({ model: 'no-such-model', messages: [{ role: 'user', content: 'hi' }] })
      .catch((x) => x);
    expect(unknown.status).toBe(404);
    await eventually(
      async () =>
        (await openai.models.list().withResponse()).response.headers.get('x-ratelimit-remaining-tokens') ===
        String(10_000 - used),
    );
    for (const h of [
      bad.headers,
      unknown.headers,
      (await openai.models.retrieve('gpt-4o-mini').withResponse()).response.headers,
    ]) {
      expect(h.get('x-ratelimit-limit-requests')).toBe('5');
      expect(h.get('x-ratelimit-remaining-requests')).toBe('4');
      // The admitted request's bound until its correction to the actual tokens reaches the window, then those.
      expect(Number(h.get('x-ratelimit-remaining-tokens'))).toBeLessThanOrEqual(10_000 - used);
      expect(Number(h.get('x-ratelimit-remaining-tokens'))).toBeGreaterThan(10_000 - used - 200);
      expect(h.get('x-ratelimit-reset-requests')).toMatch(/^(\d+m)?\d+(\.\d+)?s$/);
    }
    // On /v1/messages the Anthropic form: a 400 (max_tokens missing) carries them, the OpenAI ones not.
    const e = await new Anthropic({ apiKey: key, baseURL: gw.url, maxRetries: 0 }).messages
      .create({ model: 'claude-haiku-4-5', messages: [{ role: 'user', content: 'hi' }] } as never)
      .catch((x) => x);
    expect(e).toBeInstanceOf(Anthropic.BadRequestError);
    expect(e.headers.get('anthropic-ratelimit-requests-limit')).toBe('5');
    expect(e.headers.get('anthropic-ratelimit-requests-remaining')).toBe('4');
    expect(e.headers.get('anthropic-ratelimit-tokens-limit')).toBe('10000');
    expect(Date.parse(e.headers.get('anthropic-ratelimit-requests-reset'))).toBeGreaterThan(Date.now());
    expect(e.headers.get('x-ratelimit-limit-requests')).toBeNull();
    // None of them was counted: four requests are still admitted, the fifth is not.
    const rest = await Promise.allSettled(Array.from({ length: 5 }, () => chat(key, 10)));
    expect(rest.filter((r) => r.status === 'fulfilled')).toHaveLength(4);
  });

  test('account defaults apply to keys without their own values; a key without limits gets no headers', async () => {
    const { accountId, key } = await gw.account(1_000_000);
    const free = await chat(key);
    expect(free.response.headers.get('x-ratelimit-limit-requests')).toBeNull();
    const freeModels = await new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0 }).models
      .list()
      .withResponse();
    expect([...freeModels.response.headers.keys()].filter((h) => h.includes('ratelimit'))).toEqual([]);
    await setAccountLimits(gw.deps.db, accountId, { rpm: 2 });
    const k2 = await createApiKey(gw.deps.db, accountId, 'second');
    const r = await chat(k2.key);
    expect(r.response.headers.get('x-ratelimit-limit-requests')).toBe('2');
  });
});

describe('budgets and expiry', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startGateway({ creditLeaseVnd: 20_000, logLevel: 'silent' }, { temporal: false });
  });
  afterAll(() => gw.close());

  test('a concurrent burst never spends past a daily budget; the rest get 402 budget_exceeded, uncharged', async () => {
    const { accountId, key, keyId } = await gw.account(1_000_000);
    const budget = 3_000;
    await setKeyLimits(gw.deps.db, accountId, keyId, { budgetDayVnd: budget });
    const client = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    // gpt-4o, a 4000-character prompt, max_tokens 5: each reserves ~265 VND and costs ~67, so sixty cost more than
    // the budget (a request waits for its neighbours' unused reservations rather than being refused for them).
    const call = () =>
      client.chat.completions.create({
        model: 'gpt-4o',
        messages: [{ role: 'user', content: 'x'.repeat(4000) }],
        max_tokens: 5,
      });
    const upstreamBefore = gw.emulator.control.requests.length;
    const results = await Promise.allSettled(Array.from({ length: 60 }, call));
    expect(gw.emulator.control.requests.length - upstreamBefore).toBe(
      results.filter((r) => r.status === 'fulfilled').length,
    );
    const refused = results.filter((r) => r.status === 'rejected').map((r) => (r as PromiseRejectedResult).reason);
    expect(refused.length).toBeGreaterThan(0);
    for (const e of refused) {
      expect(e.status).toBe(402);
      expect(e.code).toBe('budget_exceeded');
    }
    await gw.deps.credit.flush();
    const spent = (
      await gw.deps.db.query('SELECT COALESCE(sum(cost_vnd), 0)::int AS v FROM usage_records WHERE api_key_id = $1', [
        keyId,
      ])
    ).rows[0].v;
    expect(spent).toBeGreaterThan(0);
    expect(spent).toBeLessThanOrEqual(budget);
    await gw.deps.credit.close();
    const s = (await keySpend(gw.deps.db, [keyId])).get(keyId)!;
    expect(s.day).toBe(spent);
    expect(s.month).toBe(spent);
    expect((await getBalance(gw.deps.db, accountId))!.balance).toBe(1_000_000 - spent);
    expect(await verifyProjections(gw.deps.db)).toEqual([]);
  });

  test('/v1/messages: an exhausted budget is a 402 billing_error, code budget_exceeded, unlike no funds', async () => {
    const { accountId, key, keyId } = await gw.account(1_000_000);
    await setKeyLimits(gw.deps.db, accountId, keyId, { budgetDayVnd: 0 });
    const upstreamBefore = gw.emulator.control.requests.length;
    const ask = (k: string) =>
      new Anthropic({ apiKey: k, baseURL: gw.url, maxRetries: 0 }).messages
        .create({ model: 'claude-haiku-4-5', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] })
        .catch((x) => x);
    const e = await ask(key);
    expect(e).toBeInstanceOf(Anthropic.APIError);
    expect(e.status).toBe(402);
    expect(e.error).toMatchObject({
      type: 'error',
      error: {
        type: 'billing_error',
        code: 'budget_exceeded',
        message: expect.stringMatching(/^This API key's daily budget is exhausted/),
      },
    });
    const empty = await gw.account(0);
    const poor = await ask(empty.key);
    expect(poor.status).toBe(402);
    expect(poor.error).toMatchObject({ type: 'error', error: { type: 'billing_error', code: 'insufficient_balance' } });
    // The same refusal on the OpenAI interface, for comparison.
    const o = await new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0 }).chat.completions
      .create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], max_tokens: 5 })
      .catch((x) => x);
    expect([o.status, o.code, o.type]).toEqual([402, 'budget_exceeded', 'insufficient_quota']);
    expect(gw.emulator.control.requests.length).toBe(upstreamBefore);
  });

  test('an expired key is refused with 401 expired_api_key', async () => {
    const { accountId, key, keyId } = await gw.account(10_000);
    await setKeyLimits(gw.deps.db, accountId, keyId, { expiresAt: new Date(Date.now() - 1000).toISOString() });
    const fresh = new KeyResolver(gw.deps.db, 0);
    expect((await fresh.resolve(key))!.expiresAt).toBeLessThan(Date.now());
    await new Promise((r) => setTimeout(r, 600)); // the gateway's key cache (keyCacheMs 500 in tests)
    const e = await new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0 }).models.list().catch((x) => x);
    expect(e.status).toBe(401);
    expect(e.code).toBe('expired_api_key');
  });
});

describe('REDIS_URL set but Redis unreachable from the start', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    // Port 1 on loopback: nothing listens there, connections are refused at once.
    gw = await startGateway(
      {
        redisUrl: 'redis://127.0.0.1:1',
        redisKeyPrefix: `gw-test:${randomUUID()}:`,
        logLevel: 'silent',
        temporalAddress: 'off',
      },
      { temporal: false },
    );
  });
  afterAll(() => gw.close());

  test('serves, limits in-process, and says so in /readyz and the metrics', async () => {
    const { accountId, key, keyId } = await gw.account(1_000_000);
    await setKeyLimits(gw.deps.db, accountId, keyId, { rpm: 2 });
    const client = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const call = () =>
      client.chat.completions.create({
        model: 'gpt-4o-mini',
        messages: [{ role: 'user', content: 'hi' }],
        max_tokens: 5,
      });
    await call();
    await call();
    const third = await call().catch((e) => e);
    expect([third.status, third.code]).toEqual([429, 'rate_limit_exceeded']);
    const ready = await fetch(`${gw.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(((await ready.json()) as { checks: Record<string, string> }).checks.ratelimit).toBe(
      'memory (redis unreachable)',
    );
    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    expect(metrics).toMatch(/^gateway_ratelimit_redis_up 0$/m);
    expect(metrics).toMatch(/^gateway_ratelimit_local_decisions_total 3$/m);
  });
});
