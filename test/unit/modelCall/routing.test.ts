import { Catalog, type CatalogFile, type ModelConfig } from '../../../src/catalog/catalog';
import { KINDS } from '../../../src/providers/kinds';
import { ModelRouter, type RouteTry } from '../../../src/modelCall/modelRouter';
import { markFailure, parseRetryAfter } from '../../../src/providers/failure';
import type { RoutingSettings } from '../../../src/modelCall/settings';

/**
 * The router's decisions without I/O: weighted rotation, cooldowns (Retry-After, bounded exponential backoff),
 * half-open probes, the bounds on tries and time, fallbacks in order, and the catalog forms it reads.
 */

const price = { inputPer1MTokens: 1, outputPer1MTokens: 1 };
const catalogFile = (): CatalogFile => ({
  providers: {
    p1: { kind: 'openai', baseUrl: 'http://a' },
    p2: { kind: 'openai', baseUrl: 'http://b' },
    p3: { kind: 'openai', baseUrl: 'http://c' },
    anth: { kind: 'anthropic', baseUrl: 'http://d' },
  },
  models: [
    { id: 'single', mode: 'chat', provider: 'p1', upstreamModel: 'u', pricing: price },
    {
      id: 'weighted',
      mode: 'chat',
      pricing: price,
      deployments: [
        { id: 'w3', provider: 'p1', weight: 3 },
        { id: 'w1', provider: 'p2', upstreamModel: 'other' },
      ],
    } as unknown as ModelConfig,
    {
      id: 'three',
      mode: 'chat',
      pricing: price,
      deployments: [{ provider: 'p1' }, { provider: 'p2' }, { provider: 'p3' }],
      fallbacks: ['single'],
    } as unknown as ModelConfig,
  ],
});

const settings: RoutingSettings = { maxAttempts: 3, maxTimeMs: 10_000, cooldownBaseMs: 1000, cooldownMaxMs: 8000 };
let now = 1_000_000;
function setup(s: Partial<RoutingSettings> = {}) {
  const catalog = new Catalog(catalogFile(), KINDS);
  return {
    catalog,
    router: new ModelRouter(catalog, { ...settings, ...s }, () => now),
    m: (id: string) => catalog.get(id)!,
  };
}
const fail = (cls: Parameters<typeof markFailure>[1], retryAfter?: string) =>
  markFailure(new Error(cls), cls, retryAfter);
/** Runs one request whose tries fail with `errors` in turn (then succeed); returns the deployments tried. */
async function request(
  router: ModelRouter,
  m: ModelConfig,
  errors: Error[] = [],
): Promise<{ tried: string[]; kinds: string[]; error: unknown }> {
  const tried: string[] = [];
  const kinds: string[] = [];
  const error = await router
    .run(m, async (t: RouteTry) => {
      tried.push(t.deployment.id);
      kinds.push(t.kind);
      const e = errors.shift();
      if (e) throw e;
      return t.deployment.id;
    })
    .then(
      () => null,
      (e) => e,
    );
  return { tried, kinds, error };
}

test('the single-upstream form is one deployment named after the model; upstream name and weight default', () => {
  const { catalog, m } = setup();
  expect(catalog.deployments(m('single'))).toEqual([
    { id: 'single', modelId: 'single', provider: 'p1', upstreamModel: 'u', weight: 1 },
  ]);
  expect(catalog.deployments(m('three')).map((d) => [d.id, d.upstreamModel, d.weight])).toEqual([
    ['three#1', 'three', 1],
    ['three#2', 'three', 1],
    ['three#3', 'three', 1],
  ]);
  // Code that knows one upstream per model sees the first deployment.
  expect(m('weighted')).toMatchObject({ provider: 'p1', upstreamModel: 'weighted' });
});

test('catalog refuses both forms at once, unknown providers, mixed protocols, fallbacks of another kind', () => {
  const bad = (edit: (f: CatalogFile) => void) => {
    const f = catalogFile();
    edit(f);
    return () => new Catalog(f, KINDS);
  };
  expect(bad((f) => Object.assign(f.models[1], { provider: 'p1', upstreamModel: 'x' }))).toThrow(/invalid catalog/);
  expect(bad((f) => f.models[1].deployments!.push({ provider: 'nope' }))).toThrow(/unknown provider nope/);
  expect(bad((f) => f.models[1].deployments!.push({ provider: 'anth' }))).toThrow(/answer in different protocols/);
  expect(bad((f) => (f.models[0].fallbacks = ['missing']))).toThrow(/unknown model missing/);
  expect(bad((f) => (f.models[0].fallbacks = ['single']))).toThrow(/cannot fall back/);
  expect(
    bad((f) =>
      f.models.push({
        id: 'emb',
        mode: 'embedding',
        provider: 'p1',
        upstreamModel: 'e',
        pricing: { inputPer1MTokens: 1 },
        fallbacks: ['single'],
      }),
    ),
  ).toThrow(/cannot fall back/);
  expect(bad((f) => f.models[1].deployments!.push({ id: 'w3', provider: 'p2' }))).toThrow(/duplicate deployment ids/);
});

test("smooth weighted round-robin gives each deployment its share over every window of the weights' sum", async () => {
  const { router, m } = setup();
  const picks: string[] = [];
  for (let i = 0; i < 8; i++) picks.push((await request(router, m('weighted'))).tried[0]);
  expect(picks.filter((p) => p === 'w3')).toHaveLength(6);
  for (let i = 0; i < 8; i += 4) expect(picks.slice(i, i + 4).filter((p) => p === 'w1')).toHaveLength(1);
});

test('a failed deployment cools for Retry-After, else a doubling backoff up to a max; a probe closes it', async () => {
  const { router, m } = setup();
  const st = router.states.find((s) => s.deployment.id === 'single')!;
  await request(router, m('single'), [fail('rate_limit', '2')]);
  expect(st.until - now).toBe(2000);
  now = st.until;
  await request(router, m('single'), [fail('server')]);
  expect(st.until - now).toBe(2000); // second failure in a row: base x 2
  now = st.until;
  await request(router, m('single'), [fail('server')]);
  expect(st.until - now).toBe(4000);
  for (let i = 0; i < 5; i++) {
    now = st.until;
    await request(router, m('single'), [fail('timeout')]);
  }
  expect(st.until - now).toBe(8000); // bounded
  expect(st.cooldowns).toBe(8);
  now = st.until;
  expect((await request(router, m('single'))).tried).toEqual(['single']);
  expect(st.failuresInRow).toBe(0);
  expect(st.probing).toBe(false);
  // A Retry-After above the bound is cut to it.
  await request(router, m('single'), [fail('rate_limit', '3600')]);
  expect(st.until - now).toBe(8000);
});

test('while a half-open probe is out, other requests keep away from it', async () => {
  const { router, m } = setup();
  const st = router.states.find((s) => s.deployment.id === 'w3')!;
  await request(router, m('weighted'), [fail('connect')]);
  now = st.until;
  let release!: () => void;
  const held = router.run(
    m('weighted'),
    (t) =>
      new Promise((res) => {
        release = () => res(t.deployment.id);
      }),
  );
  expect(st.probing).toBe(true);
  for (let i = 0; i < 3; i++) expect((await request(router, m('weighted'))).tried).toEqual(['w1']);
  release();
  expect(await held).toBe('w3');
  expect(st.probing).toBe(false);
});

/** Starts a request on `m` whose try waits until settled by hand: ok() answers it, ko(e) fails it. */
function held(router: ModelRouter, m: ModelConfig) {
  let settle!: (e: Error | null) => void;
  const done = router
    .run(
      m,
      (t) =>
        new Promise<string>((res, rej) => {
          settle = (e) => (e ? rej(e) : res(t.deployment.id));
        }),
    )
    .then(
      () => null,
      (e: unknown) => e,
    );
  return { ok: () => settle(null), ko: (e: Error) => settle(e), done };
}

test('concurrent failures cool a deployment once: tries in flight when it began do not extend it', async () => {
  const { router, m } = setup();
  const st = router.states.find((s) => s.deployment.id === 'single')!;
  const tries = Array.from({ length: 7 }, () => held(router, m('single')));
  for (const t of tries) {
    now += 100; // each 500 lands later than the one before
    t.ko(fail('server'));
    await t.done;
  }
  expect(st.failures.server).toBe(7); // each is counted for the metrics...
  expect(st.cooldowns).toBe(1); // ...but cools it once, from the first failure: base, not the 8 s max
  expect(st.failuresInRow).toBe(1);
  expect(st.until - now).toBe(1000 - 600);
  // A try started during the cooldown (the last resort of a single deployment) fails: no escalation, no extension...
  await request(router, m('single'), [fail('server')]);
  expect([st.cooldowns, st.until - now]).toEqual([1, 400]);
  // ...except by its own Retry-After, which only lengthens it.
  await request(router, m('single'), [fail('rate_limit', '2')]);
  expect([st.cooldowns, st.failuresInRow, st.until - now]).toEqual([1, 1, 2000]);
  await request(router, m('single'), [fail('rate_limit', '1')]);
  expect(st.until - now).toBe(2000);
  // A failed half-open probe escalates: base x 2.
  now = st.until;
  await request(router, m('single'), [fail('server')]);
  expect([st.cooldowns, st.failuresInRow, st.until - now, st.probing]).toEqual([2, 2, 2000, false]);
});

test("a success from a try started before the cooldown does not close it; the probe's does", async () => {
  const { router, m } = setup();
  const st = router.states.find((s) => s.deployment.id === 'single')!;
  const late = held(router, m('single'));
  const failing = held(router, m('single'));
  now += 10;
  failing.ko(fail('server'));
  await failing.done;
  const until = st.until;
  now += 10;
  late.ok();
  expect(await late.done).toBeNull();
  expect([st.failuresInRow, st.until]).toEqual([1, until]); // still cooling, count kept
  // The cooldown ends; the half-open probe fails: escalated from the count the late success did not reset.
  now = st.until;
  await request(router, m('single'), [fail('server')]);
  expect([st.failuresInRow, st.until - now]).toEqual([2, 2000]);
  // A try in flight during that failure succeeds late: the count stays; the next probe's success resets it.
  const inFlight = held(router, m('single'));
  now = st.until;
  const probe = held(router, m('single'));
  expect(st.probing).toBe(true);
  now += 10;
  probe.ko(fail('timeout'));
  await probe.done;
  inFlight.ok();
  await inFlight.done;
  expect([st.failuresInRow, st.until - now]).toEqual([3, 4000]);
  now = st.until;
  expect((await request(router, m('single'))).error).toBeNull();
  expect([st.failuresInRow, st.probing]).toEqual([0, false]);
});

test("tries stop at maxAttempts, then at the fallbacks' end; client and unmarked errors never retried", async () => {
  const { router, m } = setup({ maxAttempts: 2 });
  let r = await request(router, m('three'), [fail('server'), fail('server'), fail('server')]);
  expect(r.tried).toHaveLength(2);
  expect((r.error as Error).message).toBe('server');
  const all = setup({ maxAttempts: 10 });
  r = await request(all.router, all.m('three'), [fail('server'), fail('connect'), fail('timeout')]);
  expect(r.tried).toEqual(['three#1', 'three#2', 'three#3', 'single']);
  expect(r.kinds).toEqual(['first', 'retry', 'retry', 'fallback']);
  expect(r.error).toBeNull();
  const c = setup();
  expect((await request(c.router, c.m('three'), [fail('client')])).tried).toHaveLength(1);
  expect((await request(c.router, c.m('three'), [new Error('a bug')])).tried).toHaveLength(1);
});

test("a model object from another catalog instance of the same file is routed as the router's own", async () => {
  const { router } = setup();
  const other = new Catalog(catalogFile(), KINDS).get('three')!;
  expect(await request(router, other, [fail('server')])).toMatchObject({
    tried: ['three#1', 'three#2'],
    kinds: ['first', 'retry'],
  });
});

test('no new try starts after maxTimeMs', async () => {
  const { router, m } = setup({ maxTimeMs: 500, maxAttempts: 10 });
  const tried: string[] = [];
  await router
    .run(m('three'), async (t) => {
      tried.push(t.deployment.id);
      now += 600;
      throw fail('timeout');
    })
    .catch(() => undefined);
  expect(tried).toHaveLength(1);
});

test('all candidates cooling: the first to recover is tried anyway; with fallbacks, a healthy one first', async () => {
  const { router, m } = setup();
  await request(router, m('single'), [fail('server')]);
  expect((await request(router, m('single'))).tried).toEqual(['single']); // a lone deployment is still served
  const s = setup();
  for (const id of ['three#1', 'three#2', 'three#3'])
    s.router.states.find((x) => x.deployment.id === id)!.until = now + 5000;
  const r = await request(s.router, s.m('three'));
  expect(r).toMatchObject({ tried: ['single'], kinds: ['fallback'] });
});

test('Retry-After: delta seconds or an HTTP date', () => {
  expect(parseRetryAfter('3', 0)).toBe(3000);
  expect(parseRetryAfter('0.5', 0)).toBe(500);
  expect(parseRetryAfter(new Date(10_000).toUTCString(), 4_000)).toBe(6000);
  expect(parseRetryAfter('soon', 0)).toBeNull();
  expect(parseRetryAfter(undefined, 0)).toBeNull();
});
