import { Catalog, publicModel, type CatalogFile } from '../../../src/catalog/catalog';
import { redactorFor } from '../../../src/catalog/redact';
import { KINDS } from '../../../src/providers/kinds';

/**
 * The redactor covers every deployment, not only a model's first: each deployment's id, upstream model name and
 * key variable, every provider's id, base URL, origin, host and hostname. Public model names are never rewritten.
 */

/**
 * A fresh copy each time (a Catalog fills in its models' first deployment). As written in JSON: models with
 * deployments have no provider yet.
 */
const file = (): CatalogFile =>
  ({
    providers: {
      'east-openai': { kind: 'openai', baseUrl: 'https://east.internal.example:8443/v1', apiKeyEnv: 'EAST_KEY' },
      'west-openai': { kind: 'openai', baseUrl: 'https://west.internal.example/v1' },
      'claude-direct': { kind: 'anthropic', baseUrl: 'https://claude.internal.example', ownedBy: 'Anthropic PBC' },
      'sd-prov': { kind: 'seedance', baseUrl: 'https://sd.internal.example/api/v3' },
    },
    models: [
      {
        id: 'smart',
        mode: 'chat',
        pricing: { inputPer1MTokens: 1, outputPer1MTokens: 1 },
        deployments: [
          { id: 'smart-east', provider: 'east-openai', upstreamModel: 'smart-2025-east' },
          { provider: 'west-openai', upstreamModel: 'smart-2025-west', apiKeyEnv: 'WEST_SMART_KEY' },
        ],
      },
      // An upstream name equal to another model's public id stays as it is.
      {
        id: 'smart-mini',
        mode: 'chat',
        provider: 'west-openai',
        upstreamModel: 'smart',
        pricing: { inputPer1MTokens: 1, outputPer1MTokens: 1 },
      },
      {
        id: 'claude',
        mode: 'chat',
        provider: 'claude-direct',
        upstreamModel: 'claude-internal-7',
        pricing: { inputPer1MTokens: 1, outputPer1MTokens: 1 },
      },
      {
        id: 'sd',
        mode: 'video',
        provider: 'sd-prov',
        upstreamModel: 'dreamina-x',
        pricing: { perVideoSecond: 1 },
        allowedDurations: [5],
      },
    ],
  }) as unknown as CatalogFile;

test("every deployment's id, upstream model and key variable, and every provider's id, URL, host are replaced", () => {
  const redact = redactorFor(new Catalog(file(), KINDS, { EAST_KEY: 'a', WEST_SMART_KEY: 'b' }));
  expect(
    redact('smart-east (east-openai) at https://east.internal.example:8443/v1/chat: smart-2025-east refused EAST_KEY'),
  ).toBe('smart (upstream) at the upstream/chat: smart refused upstream key');
  expect(
    redact(
      'smart#2 on west-openai: smart-2025-west refused WEST_SMART_KEY; connect ECONNREFUSED west.internal.example',
    ),
  ).toBe('smart on upstream: smart refused upstream key; connect ECONNREFUSED the upstream');
  expect(
    redact(
      'getaddrinfo ENOTFOUND east.internal.example, east.internal.example:8443 and https://claude.internal.example',
    ),
  ).toBe('getaddrinfo ENOTFOUND the upstream, the upstream and the upstream');
  // Public names (ids, and an upstream name that is also a public id) and look-alikes are left alone.
  const plain =
    'smart and smart-mini are fine; smart-eastern, xsmart-2025-east and east-openai-compatible are other words';
  expect(redact(plain)).toBe(plain);
});

test("owned_by is the vendor of the provider's kind, or its ownedBy; never a provider id", () => {
  const c = new Catalog(file(), KINDS, {});
  const owners = Object.fromEntries(c.models.map((m) => [m.id, publicModel(m, 0, c.ownerOf(m)).owned_by]));
  expect(owners).toEqual({ smart: 'openai', 'smart-mini': 'openai', claude: 'Anthropic PBC', sd: 'bytedance' });
});
