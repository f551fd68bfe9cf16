import { Catalog, type CatalogFile, type ModelConfig } from '../../../src/catalog/catalog';
import { ModelRouter, type RouteTry } from '../../../src/modelCall/modelRouter';
import { markFailure } from '../../../src/providers/failure';
import { affinityOf, anthropicCachedPrefix, PREFIX_CHARS } from '../../../src/modelCall/affinity';
import { KINDS } from '../../../src/providers/kinds';

/**
 * Prompt-cache affinity without I/O: what a request's handle is (prompt_cache_key, Gemini cachedContent, the
 * Anthropic prefix up to its last cache_control, a long prompt's first characters), and how the router places
 * handles by weighted rendezvous hashing: one deployment per handle while it is healthy, the weights honoured over
 * many handles, a cooldown moving only its own handles, and back once it is over.
 */

const price = { inputPer1MTokens: 1, outputPer1MTokens: 1 };
const file = (weights: number[]): CatalogFile => ({
  providers: Object.fromEntries(weights.map((_, i) => [`p${i}`, { kind: 'openai', baseUrl: `http://h${i}` }])),
  models: [
    {
      id: 'm',
      mode: 'chat',
      pricing: price,
      deployments: weights.map((weight, i) => ({ id: `d${i}`, provider: `p${i}`, weight })),
    } as unknown as ModelConfig,
  ],
});
const settings = { maxAttempts: 3, maxTimeMs: 30_000, cooldownBaseMs: 1000, cooldownMaxMs: 60_000 };

function routerOf(weights: number[]) {
  let now = 1_000_000;
  const catalog = new Catalog(file(weights), KINDS);
  const router = new ModelRouter(catalog, settings, () => now);
  const m = catalog.get('m')!;
  const route = async (handle: string | null, fail?: string) =>
    router.run(
      m,
      async (t: RouteTry) => {
        if (t.deployment.id === fail) throw markFailure(new Error('boom'), 'server');
        return t.deployment.id;
      },
      { routed: () => undefined, affinity: handle },
    );
  return { route, advance: (ms: number) => (now += ms) };
}

test('the handle: cache key first, then the Anthropic cached prefix, then a long prompt; short prompts none', () => {
  expect(affinityOf({ cacheKey: 'conv-1', prompt: ['x'.repeat(PREFIX_CHARS)] })).toBe('k:conv-1');
  expect(affinityOf({ prompt: [{ role: 'user', content: 'short' }] })).toBeNull();
  const system = 'You are a careful assistant. '.repeat(200);
  const turn1 = [
    { role: 'system', content: system },
    { role: 'user', content: 'first question' },
  ];
  const turn2 = [...turn1, { role: 'assistant', content: 'an answer' }, { role: 'user', content: 'second' }];
  expect(affinityOf({ prompt: turn1 })).toMatch(/^p:/);
  expect(affinityOf({ prompt: turn2 })).toBe(affinityOf({ prompt: turn1 }));
  expect(affinityOf({ prompt: [{ role: 'system', content: 'Other. ' + system }] })).not.toBe(
    affinityOf({ prompt: turn1 }),
  );
  const tools = [{ name: 't', input_schema: { type: 'object' } }];
  const marked = {
    tools,
    system: [{ type: 'text', text: 'short system', cache_control: { type: 'ephemeral' } }],
    messages: [{ role: 'user', content: 'q1' }],
  };
  expect(anthropicCachedPrefix(marked)).toEqual([tools, marked.system]);
  const next = {
    ...marked,
    messages: [...marked.messages, { role: 'assistant', content: 'a' }, { role: 'user', content: 'q2' }],
  };
  expect(affinityOf({ anthropic: next })).toBe(affinityOf({ anthropic: marked }));
  expect(affinityOf({ anthropic: { messages: [{ role: 'user', content: 'q' }] } })).toBeNull();
});

test('one deployment per handle while healthy; weights hold over many handles; no handle: rotation', async () => {
  const { route } = routerOf([1, 1, 2]);
  const counts: Record<string, number> = { d0: 0, d1: 0, d2: 0 };
  for (let i = 0; i < 4000; i++) {
    const first = await route(`h${i}`);
    expect(await route(`h${i}`)).toBe(first);
    counts[first]++;
  }
  // Weighted 1:1:2 over 4,000 handles: within a few percent.
  expect(counts.d2 / 4000).toBeGreaterThan(0.45);
  expect(counts.d2 / 4000).toBeLessThan(0.55);
  expect(counts.d0 / 4000).toBeGreaterThan(0.2);
  expect(counts.d1 / 4000).toBeGreaterThan(0.2);
  const seen = new Set<string>();
  for (let i = 0; i < 4; i++) seen.add(await route(null));
  expect(seen.size).toBe(3);
});

test('a cooldown moves only the handles of the deployment cooling down, and they come back after it', async () => {
  const { route, advance } = routerOf([1, 1, 1]);
  const before = new Map<string, string>();
  for (let i = 0; i < 300; i++) before.set(`h${i}`, await route(`h${i}`));
  const victim = before.get('h0')!;
  // Its next request fails there: retried on the handle's next choice, and the deployment cools down.
  const moved = await route('h0', victim);
  expect(moved).not.toBe(victim);
  for (const [h, d] of before) {
    const now = await route(h);
    if (d === victim) expect(now).not.toBe(victim);
    else expect(now).toBe(d); // the others keep theirs
  }
  expect(await route('h0')).toBe(moved); // consistently on its second choice while the first cools
  advance(settings.cooldownBaseMs + 1);
  expect(await route('h0')).toBe(victim);
});
