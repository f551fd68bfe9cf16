import { pricesFrom, type Prices, type PriceSets } from '../../../src/billing/priceBook';
import { batchPricesMissing } from '../../../src/cli/prices';

/** The composition of price versions (src/billing/priceBook.ts) and the batch-price rule of price-set. */

const file: Prices = {
  pricing: { inputPer1MTokens: 3900, cachedInputPer1MTokens: 1950, outputPer1MTokens: 15600 },
  batchPricing: { inputPer1MTokens: 1950, cachedInputPer1MTokens: 975, outputPer1MTokens: 7800 },
};
const change = (sets: Partial<PriceSets>) => ({
  sets: { pricing: {}, batchPricing: {}, ...sets },
  pricing: {},
  batchPricing: null,
});

test('each field is what was set for it at or before the instant, in effective order', () => {
  const input = change({ pricing: { inputPer1MTokens: 7800 }, batchPricing: { inputPer1MTokens: 3900 } });
  const output = change({ pricing: { outputPer1MTokens: 31200 } });
  expect([input, output].reduce(pricesFrom, file)).toEqual({
    pricing: { inputPer1MTokens: 7800, cachedInputPer1MTokens: 1950, outputPer1MTokens: 31200 },
    batchPricing: { inputPer1MTokens: 3900, cachedInputPer1MTokens: 975, outputPer1MTokens: 7800 },
  });
  // Changes of different fields commute.
  expect([output, input].reduce(pricesFrom, file)).toEqual([input, output].reduce(pricesFrom, file));
});

test('null removes a field; every batch price removed leaves batch work at the list prices', () => {
  const removed = pricesFrom(
    file,
    change({
      pricing: { cachedInputPer1MTokens: null },
      batchPricing: { inputPer1MTokens: null, cachedInputPer1MTokens: null, outputPer1MTokens: null },
    }),
  );
  expect(removed).toEqual({ pricing: { inputPer1MTokens: 3900, outputPer1MTokens: 15600 }, batchPricing: null });
});

test('a version of whole prices (catalog, import) replaces them; the run-time marks are never stored', () => {
  const whole = { sets: null, pricing: { inputPer1MTokens: 1 }, batchPricing: null };
  expect(pricesFrom(file, whole)).toEqual({ pricing: { inputPer1MTokens: 1 }, batchPricing: null });
  const marked = { ...file, pricing: { ...file.pricing, priceVersion: 7 } };
  expect(pricesFrom(marked, change({})).pricing).not.toHaveProperty('priceVersion');
});

test('a list price with a batch price asks for it, stated at the discount in force, rounded up', () => {
  expect(batchPricesMissing('m', file, { outputPer1MTokens: 31201 }, {})).toMatch(
    `--batch-pricing '{"outputPer1MTokens":15601}'`,
  );
  expect(batchPricesMissing('m', file, { outputPer1MTokens: 31201 }, { outputPer1MTokens: 1 })).toBeNull();
  // No batch price of that field, or none at all: nothing to ask.
  expect(batchPricesMissing('m', file, { reasoningPer1MTokens: 5 }, {})).toBeNull();
  expect(batchPricesMissing('m', { ...file, batchPricing: null }, { inputPer1MTokens: 5 }, {})).toBeNull();
});
