import { Catalog, type CatalogFile } from '../../../src/catalog/catalog';
import { KINDS } from '../../../src/providers/kinds';

/**
 * Model names: ids, aliases, then each provider's glob patterns in order; unknown names and unpriced models refused.
 */

const file = (over: Partial<CatalogFile> = {}): CatalogFile => ({
  providers: {
    anth: {
      kind: 'anthropic',
      baseUrl: 'http://x',
      modelPatterns: [
        { match: 'claude-*opus*', model: 'opus' },
        { match: 'claude-*', model: 'sonnet' },
      ],
    },
    oai: { kind: 'openai', baseUrl: 'http://y' },
  },
  models: [
    {
      id: 'sonnet',
      mode: 'chat',
      provider: 'anth',
      upstreamModel: 's',
      aliases: ['claude-sonnet-4-6-20260101'],
      pricing: { inputPer1MTokens: 1, outputPer1MTokens: 1 },
    },
    {
      id: 'opus',
      mode: 'chat',
      provider: 'anth',
      upstreamModel: 'o',
      pricing: { inputPer1MTokens: 1, outputPer1MTokens: 1 },
    },
    {
      id: 'claude-special',
      mode: 'chat',
      provider: 'oai',
      upstreamModel: 'c',
      pricing: { inputPer1MTokens: 1, outputPer1MTokens: 1 },
    },
  ],
  ...over,
});

test('ids and aliases first, then patterns in order; anything else is model_not_found', () => {
  const c = new Catalog(file(), KINDS);
  expect(c.get('sonnet')!.id).toBe('sonnet');
  expect(c.get('claude-sonnet-4-6-20260101')!.id).toBe('sonnet');
  expect(c.get('claude-special')!.id).toBe('claude-special'); // an exact id is never shadowed by a pattern
  expect(c.get('claude-3-opus-20240229')!.id).toBe('opus');
  expect(c.get('claude-sonnet-5-0')!.id).toBe('sonnet');
  expect(c.get('claude')).toBeUndefined(); // the pattern is anchored: claude-* needs the dash
  expect(c.get('gpt-4o')).toBeUndefined();
  expect(() => c.require('xclaude-opus', 'chat')).toThrow(
    expect.objectContaining({ status: 404, code: 'model_not_found' }),
  );
  expect(c.patternsOf(c.get('opus')!)).toEqual(['claude-*opus*']);
});

test('glob characters other than * are literal', () => {
  const c = new Catalog(
    file({
      providers: {
        anth: { kind: 'anthropic', baseUrl: 'http://x', modelPatterns: [{ match: 'a.b+(c)*', model: 'sonnet' }] },
        oai: { kind: 'openai', baseUrl: 'http://y' },
      },
    }),
    KINDS,
  );
  expect(c.get('a.b+(c)-x')!.id).toBe('sonnet');
  expect(c.get('aXb+(c)-x')).toBeUndefined();
});

test('a catalog with an unpriced model, or a pattern to an unknown or foreign model, does not load', () => {
  const f = file();
  f.models[0] = { ...f.models[0], pricing: { inputPer1MTokens: 1 } };
  expect(() => new Catalog(f, KINDS)).toThrow(/no pricing.outputPer1MTokens/);
  expect(
    () =>
      new Catalog(
        file({
          providers: {
            anth: { kind: 'anthropic', baseUrl: 'http://x', modelPatterns: [{ match: 'x*', model: 'nope' }] },
            oai: { kind: 'openai', baseUrl: 'http://y' },
          },
        }),
        KINDS,
      ),
  ).toThrow(/unknown model nope/);
  expect(
    () =>
      new Catalog(
        file({
          providers: {
            anth: { kind: 'anthropic', baseUrl: 'http://x', modelPatterns: [{ match: 'x*', model: 'claude-special' }] },
            oai: { kind: 'openai', baseUrl: 'http://y' },
          },
        }),
        KINDS,
      ),
  ).toThrow(/a model of provider oai/);
});
