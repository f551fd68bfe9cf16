import { MemoryRateLimiter, WINDOW_MS, admissionId, PROCESS_TAG, windowView } from '../../../src/limits/rateLimiter';

/**
 * The in-process sliding window of requests and tokens per minute, on a fake clock: exact limits wherever the
 * minute falls, when a refused request could come back, token corrections at settlement, and read-only views.
 */

const T0 = Date.UTC(2026, 0, 1, 12, 0, 0);
let limiter: MemoryRateLimiter;
beforeEach(() => {
  jest.useFakeTimers({ now: T0 });
  limiter = new MemoryRateLimiter();
});
afterEach(async () => {
  await limiter.close();
  jest.useRealTimers();
});
const at = (ms: number) => jest.setSystemTime(T0 + ms);

test('a burst gets exactly the RPM; the next request may come when the oldest leaves the window', async () => {
  const limits = { rpm: 3, tpm: null };
  for (const t of [0, 10_000, 20_000]) {
    at(t);
    const a = await limiter.check('k', limits, 0);
    expect(a.allowed).toBe(true);
    expect(a.ticket).toBeNull(); // no TPM: nothing to correct later
    expect(a.tokens).toBeNull();
  }
  at(30_000);
  const refused = await limiter.check('k', limits, 0);
  expect(refused).toMatchObject({
    allowed: false,
    refused: 'requests',
    retryAfterMs: 30_000, // the request at 0 leaves at 60 s
    requests: { limit: 3, remaining: 0, resetMs: 50_000 }, // the window is empty at 20 s + 60 s
  });
  at(59_999);
  expect((await limiter.check('k', limits, 0)).allowed).toBe(false);
  at(60_000); // exactly a window after the first: it is out
  const again = await limiter.check('k', limits, 0);
  expect(again).toMatchObject({ allowed: true, requests: { limit: 3, remaining: 0, resetMs: 60_000 } });
  expect((await limiter.check('other', limits, 0)).allowed).toBe(true); // keys are separate
});

test('a refused request is not counted: a client hammering a full window does not push its reset back', async () => {
  const limits = { rpm: 1, tpm: null };
  expect((await limiter.check('k', limits, 0)).allowed).toBe(true);
  for (let t = 1000; t < 60_000; t += 1000) {
    at(t);
    const a = await limiter.check('k', limits, 0);
    expect(a.allowed).toBe(false);
    expect(a.retryAfterMs).toBe(60_000 - t);
  }
  at(60_000);
  expect((await limiter.check('k', limits, 0)).allowed).toBe(true);
});

test('TPM counts each request by its token bound; a refusal says when enough tokens leave', async () => {
  const limits = { rpm: null, tpm: 1000 };
  const a = await limiter.check('k', limits, 600);
  expect(a).toMatchObject({ allowed: true, tokens: { limit: 1000, remaining: 400, resetMs: 60_000 }, requests: null });
  expect(a.ticket).toMatchObject({ keyId: 'k', tokens: 600 });
  at(5000);
  expect((await limiter.check('k', limits, 300)).allowed).toBe(true); // 900 of 1000
  at(10_000);
  const r = await limiter.check('k', limits, 200);
  // 1100 > 1000; once the first 600 leave (at 60 s) 300 + 200 fit.
  expect(r).toMatchObject({ allowed: false, refused: 'tokens', retryAfterMs: 50_000, ticket: null });
  expect(r.tokens).toEqual({ limit: 1000, remaining: 100, resetMs: 55_000 });
  expect((await limiter.check('k', limits, 100)).allowed).toBe(true); // exactly 1000 fits
});

test('a request larger than the TPM by itself is refused as too large, whatever the window holds', async () => {
  const r = await limiter.check('k', { rpm: 10, tpm: 1000 }, 1001);
  expect(r).toMatchObject({ allowed: false, refused: 'too_large', ticket: null });
  expect(r.requests).toEqual({ limit: 10, remaining: 10, resetMs: 0 }); // nothing counted
  expect((await limiter.check('k', { rpm: 10, tpm: 1000 }, 1000)).allowed).toBe(true);
});

test('with both limits full the later of the two refusals is the one to wait for', async () => {
  const limits = { rpm: 2, tpm: 100 };
  await limiter.check('k', limits, 10);
  at(20_000);
  await limiter.check('k', limits, 90);
  at(30_000);
  const r = await limiter.check('k', limits, 50);
  expect(r.refused).toBe('requests'); // the requests window is named first
  expect(r.retryAfterMs).toBe(50_000); // but room for 50 tokens comes only when the 90 leave, at 80 s
});

test('settle corrects the admitted tokens to those used; an entry that left the window is not touched', async () => {
  const limits = { rpm: null, tpm: 1000 };
  const a = await limiter.check('k', limits, 900);
  limiter.settle(a.ticket!, 99.2); // rounds up: tokens are whole
  expect((await limiter.peek('k', limits)).tokens).toEqual({ limit: 1000, remaining: 900, resetMs: 60_000 });
  expect((await limiter.check('k', limits, 900)).allowed).toBe(true);
  limiter.settle(a.ticket!, -5); // never below zero
  expect((await limiter.usage(['k'])).get('k')).toEqual({ requests: 0, tokens: 900 });

  at(60_000);
  const b = await limiter.check('k', limits, 10);
  at(120_001);
  expect((await limiter.check('k', limits, 0)).allowed).toBe(true); // sweeps b out of the window
  limiter.settle(b.ticket!, 500); // too late to count: its tokens were already subtracted
  expect((await limiter.check('k', limits, 1000)).allowed).toBe(true);
});

test('peek and usage count only what is in the window, and count nothing themselves', async () => {
  const limits = { rpm: 5, tpm: 100 };
  expect(await limiter.peek('new', limits)).toEqual({
    requests: { limit: 5, remaining: 5, resetMs: 0 },
    tokens: { limit: 100, remaining: 100, resetMs: 0 },
  });
  await limiter.check('k', limits, 30);
  at(40_000);
  await limiter.check('k', limits, 20);
  expect(await limiter.peek('k', limits)).toEqual({
    requests: { limit: 5, remaining: 3, resetMs: 60_000 },
    tokens: { limit: 100, remaining: 50, resetMs: 60_000 },
  });
  at(70_000); // the first request left; nothing was checked since, so nothing was swept
  expect(await limiter.peek('k', limits)).toEqual({
    requests: { limit: 5, remaining: 4, resetMs: 30_000 },
    tokens: { limit: 100, remaining: 80, resetMs: 30_000 },
  });
  expect(await limiter.usage(['k', 'none'])).toEqual(
    new Map([
      ['k', { requests: 1, tokens: 20 }],
      ['none', { requests: 0, tokens: 0 }],
    ]),
  );
  expect(await limiter.peek('k', { rpm: null, tpm: null })).toEqual({ requests: null, tokens: null });
});

test('a long run of requests keeps the window exact as its log is compacted', async () => {
  const limits = { rpm: 3000, tpm: null };
  let admitted = 0;
  for (let t = 0; t < 120_000; t += 20) if (limiter.checkNow('k', limits, 0, T0 + t).allowed) admitted++;
  expect(admitted).toBe(6000);
  // 3,000 per minute at one per 20 ms: the window is exactly full.
  const r = limiter.checkNow('k', limits, 0, T0 + 120_000 - 1);
  expect(r).toMatchObject({ allowed: false, retryAfterMs: 1, requests: { remaining: 0 } }); // the one at 60 s leaves
});

test('windowView clamps what remains at zero and leaves out the limits a key does not have', () => {
  expect(windowView({ rpm: 10, tpm: null }, 12, 5, 100, 200)).toEqual({
    requests: { limit: 10, remaining: 0, resetMs: 100 },
    tokens: null,
  });
  expect(windowView({ rpm: null, tpm: 50 }, 1, 20, 0, 9)).toEqual({
    requests: null,
    tokens: { limit: 50, remaining: 30, resetMs: 9 },
  });
});

test('admission ids are unique and carry this process tag', () => {
  const ids = new Set(Array.from({ length: 1000 }, () => admissionId()));
  expect(ids.size).toBe(1000);
  for (const id of ids) expect(id.startsWith(PROCESS_TAG)).toBe(true);
  expect(WINDOW_MS).toBe(60_000);
});
