import {
  admitRequest,
  hasRateLimits,
  openAIDuration,
  setRateLimitHeaders,
  unitTokens,
} from '../../../src/modelCall/rateLimit';
import { accountBilling, holdBilling, type AccountBilling } from '../../../src/modelCall';
import { openCall } from '../../../src/modelCall/routedCall';
import { MemoryRateLimiter } from '../../../src/limits/rateLimiter';
import { Metrics } from '../../../src/observability/metrics';
import { Catalog, type CatalogFile, type ModelConfig } from '../../../src/catalog/catalog';
import { ModelRouter } from '../../../src/modelCall/modelRouter';
import { InsufficientFunds } from '../../../src/billing/ledger';
import type { CreditManager } from '../../../src/modelCall/credit';
import type { KeyResolver } from '../../../src/auth/apiKeys';
import { ApiError } from '../../../src/errors';
import { principal, RecordingHold, RecordingOutput, testCaller } from '../../support/operationCaller';
import { KINDS } from '../../../src/providers/kinds';

/**
 * A key's rate limits on the request path, with the in-memory limiter: admitted or refused before any money is
 * reserved, the headers each interface names them by, the 429 and its Retry-After, and the tokens given back when
 * the money refuses the request instead.
 */

const T0 = Date.UTC(2026, 0, 1, 12, 0, 0);
let limiter: MemoryRateLimiter;
let metrics: Metrics;
beforeEach(() => {
  jest.useFakeTimers({ now: T0 });
  limiter = new MemoryRateLimiter();
  metrics = new Metrics();
});
afterEach(async () => {
  await limiter.close();
  jest.useRealTimers();
});

const refusals = async (limit: string) =>
  (await metrics.limitRefusals.get()).values.find((v) => v.labels.limit === limit)?.value ?? 0;

async function refusal(p: Promise<unknown>): Promise<ApiError> {
  const e = await p.then(
    () => null,
    (err) => err,
  );
  expect(e).toBeInstanceOf(ApiError);
  return e as ApiError;
}

test("OpenAI's duration form", () => {
  expect(openAIDuration(0)).toBe('0ms');
  expect(openAIDuration(-5)).toBe('0ms');
  expect(openAIDuration(20.2)).toBe('21ms');
  expect(openAIDuration(999)).toBe('999ms');
  expect(openAIDuration(1000)).toBe('1s');
  expect(openAIDuration(1500)).toBe('1.5s');
  expect(openAIDuration(59_990)).toBe('59.99s');
  expect(openAIDuration(60_000)).toBe('1m0s');
  expect(openAIDuration(360_000)).toBe('6m0s');
  expect(openAIDuration(61_234)).toBe('1m1.23s');
});

test('the headers: OpenAI names with a duration, Anthropic names with an RFC 3339 time; none for no limit', () => {
  const view = {
    requests: { limit: 10, remaining: 7, resetMs: 1500 },
    tokens: { limit: 1000, remaining: 0, resetMs: 60_000 },
  };
  const openai = new RecordingOutput();
  setRateLimitHeaders(openai, false, view);
  expect(Object.fromEntries(openai.headers)).toEqual({
    'x-ratelimit-limit-requests': '10',
    'x-ratelimit-remaining-requests': '7',
    'x-ratelimit-reset-requests': '1.5s',
    'x-ratelimit-limit-tokens': '1000',
    'x-ratelimit-remaining-tokens': '0',
    'x-ratelimit-reset-tokens': '1m0s',
  });
  const anthropic = new RecordingOutput();
  setRateLimitHeaders(anthropic, true, { ...view, tokens: null });
  expect(Object.fromEntries(anthropic.headers)).toEqual({
    'anthropic-ratelimit-requests-limit': '10',
    'anthropic-ratelimit-requests-remaining': '7',
    'anthropic-ratelimit-requests-reset': '2026-01-01T12:00:02Z', // rounded up to the second
  });
  const none = new RecordingOutput();
  setRateLimitHeaders(none, false, { requests: null, tokens: null });
  expect(none.headers.size).toBe(0);
});

test('a key without limits is not checked: no ticket, no headers', async () => {
  const caller = testCaller(holdBilling(new RecordingHold()));
  expect(await admitRequest(caller, { limiter, metrics }, 1e9)).toBeNull();
  expect(caller.out.headers.size).toBe(0);
  expect(caller.rateLimitHeaders).toBeUndefined();
});

test('admitted: the ticket to correct at settlement and the headers of the window after it', async () => {
  const caller = testCaller(holdBilling(new RecordingHold()), { principal: principal({ rpm: 5, tpm: 1000 }) });
  const ticket = await admitRequest(caller, { limiter, metrics }, 300);
  expect(ticket).toMatchObject({ keyId: 'key_1', tokens: 300 });
  expect(caller.rateLimitHeaders).toBe(true);
  expect(caller.out.headers.get('x-ratelimit-remaining-requests')).toBe('4');
  expect(caller.out.headers.get('x-ratelimit-remaining-tokens')).toBe('700');
});

test('the requests window full: 429 naming RPM, the usage, and when to come back', async () => {
  const caller = testCaller(holdBilling(new RecordingHold()), { principal: principal({ rpm: 2 }) });
  await admitRequest(caller, { limiter, metrics }, 10);
  jest.setSystemTime(T0 + 15_000);
  await admitRequest(caller, { limiter, metrics }, 10);
  jest.setSystemTime(T0 + 20_000);
  const e = await refusal(admitRequest(caller, { limiter, metrics }, 10));
  expect(e).toMatchObject({
    status: 429,
    code: 'rate_limit_exceeded',
    type: 'requests',
    message:
      'Rate limit reached for requests per minute (RPM) on this API key: Limit 2, Used 2, Requested 1. ' +
      'Please try again in 40s.',
    headers: { 'retry-after': '40', 'retry-after-ms': '40000' },
  });
  expect(caller.out.headers.get('x-ratelimit-remaining-requests')).toBe('0');
  expect(await refusals('requests')).toBe(1);
});

test('the tokens window full: 429 naming TPM and the tokens requested; a wait under a second says 1 s', async () => {
  const caller = testCaller(holdBilling(new RecordingHold()), { principal: principal({ tpm: 100 }) });
  await admitRequest(caller, { limiter, metrics }, 80);
  jest.setSystemTime(T0 + 59_500);
  const e = await refusal(admitRequest(caller, { limiter, metrics }, 30));
  expect(e.message).toBe(
    'Rate limit reached for tokens per minute (TPM) on this API key: Limit 100, Used 80, Requested 30. ' +
      'Please try again in 500ms.',
  );
  expect(e.headers).toEqual({ 'retry-after': '1', 'retry-after-ms': '500' });
  expect(await refusals('tokens')).toBe(1);
});

test('a request larger than the TPM: 429 without Retry-After (waiting does not help)', async () => {
  const caller = testCaller(holdBilling(new RecordingHold()), { principal: principal({ tpm: 100 }) });
  const e = await refusal(admitRequest(caller, { limiter, metrics }, 101));
  expect(e).toMatchObject({ status: 429, code: 'rate_limit_exceeded', type: 'tokens' });
  expect(e.message).toMatch(/^Request too large: this request may use up to 101 tokens/);
  expect(e.headers).toEqual({});
  expect(await refusals('tokens')).toBe(1);
});

test("unit tokens: a settled request's prompt and completion tokens; none for other units", () => {
  expect(unitTokens({ prompt_tokens: 5, completion_tokens: 7, cached_tokens: 3 })).toBe(12);
  expect(unitTokens({ images: 2 })).toBe(0);
});

// ---- openCall: the admission before the money ----

const catalog = new Catalog(
  {
    providers: { p: { kind: 'openai', baseUrl: 'http://a' } },
    models: [
      {
        id: 'm',
        mode: 'chat',
        provider: 'p',
        upstreamModel: 'm',
        pricing: { inputPer1MTokens: 1, outputPer1MTokens: 1 },
      } as ModelConfig,
    ],
  } as CatalogFile,
  KINDS,
);
const router = new ModelRouter(catalog, { maxAttempts: 1, maxTimeMs: 1000, cooldownBaseMs: 1, cooldownMaxMs: 1 });
const freshKeys = { isStale: () => false, refresh: async () => null } as unknown as KeyResolver;

/** Account billing whose credit reserves from `reserve` (counted). */
function account(reserve: () => Promise<RecordingHold>): AccountBilling & { reserves: number } {
  const b = accountBilling({
    credit: { reserve: () => (b.reserves++, reserve()) } as unknown as CreditManager,
    limiter,
    metrics,
    keys: freshKeys,
  }) as AccountBilling & { reserves: number };
  b.reserves = 0;
  return b;
}

test('refused by its rate limit, a request reserves nothing', async () => {
  const billing = account(async () => new RecordingHold());
  const caller = testCaller(billing, { principal: principal({ rpm: 1 }) });
  await openCall(caller, { router }, catalog.get('m')!, 'chat.completions', { maxCost: 10, maxTokens: 5 });
  expect(billing.reserves).toBe(1);
  const e = await refusal(
    openCall(caller, { router }, catalog.get('m')!, 'chat.completions', { maxCost: 10, maxTokens: 5 }),
  );
  expect(e.status).toBe(429);
  expect(billing.reserves).toBe(1);
});

test('refused for money after its admission, a request gives its tokens back to the window', async () => {
  const billing = account(async () => {
    throw new InsufficientFunds(500, 20);
  });
  const caller = testCaller(billing, { principal: principal({ tpm: 1000 }) });
  const e = await refusal(
    openCall(caller, { router }, catalog.get('m')!, 'chat.completions', { maxCost: 500, maxTokens: 900 }),
  );
  expect(e).toMatchObject({ status: 402, code: 'insufficient_balance' });
  // The 900 tokens admitted are settled to 0: the whole window is free again.
  expect((await limiter.peek('key_1', { rpm: null, tpm: 1000 })).tokens?.remaining).toBe(1000);
  expect(caller.call).toBeUndefined();
});

test('a hold covers the call: no admission, no reservation; the call settles into the hold', async () => {
  const hold = new RecordingHold();
  const caller = testCaller(holdBilling(hold, undefined, 'batch.chat.completions'), {
    principal: principal({ rpm: 1, tpm: 1 }), // limits a hold's calls are not held to
  });
  for (let i = 0; i < 3; i++) {
    const call = await openCall(caller, { router }, catalog.get('m')!, 'chat.completions', {
      maxCost: 10,
      maxTokens: 1e6,
    });
    expect(caller.call).toBe(call);
    expect(call.operation).toBe('batch.chat.completions');
  }
  expect(caller.out.headers.size).toBe(0);
  expect((await limiter.usage(['key_1'])).get('key_1')).toEqual({ requests: 0, tokens: 0 });
});

test('hasRateLimits: a window of the key, or of its project for the model, and only then', () => {
  expect(hasRateLimits(principal(), 'gpt-4o-mini')).toBe(false);
  expect(hasRateLimits(principal({ rpm: 10 }))).toBe(true);
  expect(hasRateLimits(principal({ tpm: 1000 }), 'gpt-4o-mini')).toBe(true);
  const inProject = { ...principal(), projectId: 'proj_1', modelLimits: { 'gpt-4o': { rpm: 5, tpm: null } } };
  expect(hasRateLimits(inProject, 'gpt-4o')).toBe(true);
  expect(hasRateLimits(inProject, 'gpt-4o-mini')).toBe(false);
  expect(hasRateLimits(inProject)).toBe(false);
});
