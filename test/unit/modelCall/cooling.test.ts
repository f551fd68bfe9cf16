import { Catalog, type CatalogFile, type ModelConfig } from '../../../src/catalog/catalog';
import { ModelRouter } from '../../../src/modelCall/modelRouter';
import { markFailure } from '../../../src/providers/failure';
import { coolingUntil, type CoolingDeps } from '../../../src/modelCall/cooling';
import { KINDS } from '../../../src/providers/kinds';

/**
 * A batch waits while every deployment that could answer its model (its own and its fallbacks') cools down, until
 * the first comes back; one available deployment anywhere in the chain is enough to go on.
 */

const price = { inputPer1MTokens: 1, outputPer1MTokens: 1 };
const file: CatalogFile = {
  providers: { p1: { kind: 'openai', baseUrl: 'http://a' }, p2: { kind: 'openai', baseUrl: 'http://b' } },
  models: [
    {
      id: 'two',
      mode: 'chat',
      pricing: price,
      deployments: [{ provider: 'p1' }, { provider: 'p2' }],
      fallbacks: ['backup'],
    },
    { id: 'backup', mode: 'chat', provider: 'p2', upstreamModel: 'b', pricing: price },
    { id: 'alone', mode: 'chat', provider: 'p1', upstreamModel: 'a', pricing: price },
  ] as ModelConfig[],
};

let now = 1_000_000;
const catalog = new Catalog(file, KINDS);
const router = new ModelRouter(
  catalog,
  { maxAttempts: 1, maxTimeMs: 10_000, cooldownBaseMs: 1000, cooldownMaxMs: 60_000 },
  () => now,
);
const deps: CoolingDeps = { catalog, router };

/** One request to `model` whose try is refused with 429 and `retryAfter` seconds: that deployment cools down. */
async function refuse(model: string, retryAfter: string): Promise<void> {
  await router
    .run(catalog.get(model)!, async () => {
      throw markFailure(new Error('429'), 'rate_limit', retryAfter);
    })
    .catch(() => undefined);
}

test('nothing cooling: go on at once', () => {
  expect(coolingUntil(deps, catalog.get('two')!, now)).toBe(0);
  expect(coolingUntil(deps, catalog.get('alone')!, now)).toBe(0);
});

test('the chain waits only when all of it cools, until the first deployment comes back', async () => {
  const two = catalog.get('two')!;
  await refuse('alone', '5'); // another model's deployment: no concern of this chain
  expect(coolingUntil(deps, two, now)).toBe(0);
  expect(coolingUntil(deps, catalog.get('alone')!, now)).toBe(now + 5000);

  await refuse('backup', '30');
  expect(coolingUntil(deps, two, now)).toBe(0); // its own deployments are still up
  await refuse('two', '20');
  expect(coolingUntil(deps, two, now)).toBe(0); // one of its two still up
  await refuse('two', '10');
  expect(coolingUntil(deps, two, now)).toBe(now + 10_000); // all three down: the first back in 10 s
  now += 10_000;
  expect(coolingUntil(deps, two, now)).toBe(0);
});
