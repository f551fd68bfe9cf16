import type { PriceSet } from '../../../src/catalog/catalog';
import { askedDims, deliveredDims, videoHoldPrice, videoSecondPrice } from '../../../src/billing/videoPricing';
import { catalogPricing } from '../../support/videoPrices';

/** Video prices by dimension: the first matching row prices what was delivered; the hold covers what could be. */

const p: PriceSet = {
  perVideoSecond: 6000,
  videoPerSecond: [
    { resolution: '480p', audio: false, perSecond: 1000 },
    { resolution: '480p', perSecond: 1500 },
    { resolution: '1080p', input: 'reference', perSecond: 5500 },
    { resolution: '1080p', perSecond: 5000 },
  ],
};

test('the first row whose named dimensions all match prices a delivered video; none: perVideoSecond', () => {
  expect(videoSecondPrice(p, { resolution: '480p', audio: false })).toBe(1000);
  expect(videoSecondPrice(p, { resolution: '480p', audio: true })).toBe(1500);
  expect(videoSecondPrice(p, { resolution: '1080p', input: 'reference' })).toBe(5500);
  expect(videoSecondPrice(p, { resolution: '1080p', input: 'text' })).toBe(5000);
  expect(videoSecondPrice(p, { resolution: '720p' })).toBe(6000);
  expect(videoSecondPrice({ perVideoSecond: 3600 }, { resolution: '4k', audio: true })).toBe(3600);
});

test('the hold is the highest price what was asked can be delivered at', () => {
  expect(videoHoldPrice(p, { resolution: '480p', audio: false, input: 'text' })).toBe(1000);
  // Audio left open: either 480p row may apply.
  expect(videoHoldPrice(p, { resolution: '480p', input: 'text' })).toBe(1500);
  // Resolution left open: any row, and the fallback (no row surely applies).
  expect(videoHoldPrice(p, { audio: true, input: 'text' })).toBe(6000);
  expect(videoHoldPrice({ ...p, perVideoSecond: 100 }, { audio: true, input: 'text' })).toBe(5000);
  // No row can apply: the fallback.
  expect(videoHoldPrice(p, { resolution: '720p' })).toBe(6000);
  expect(videoHoldPrice({ perVideoSecond: 3600 }, {})).toBe(3600);
});

test('asked and delivered dimensions', () => {
  const asked = askedDims({
    resolution: '1080p',
    generateAudio: true,
    parameters: { service_tier: 'flex' },
    images: { referenceImages: [{}] },
  });
  expect(asked).toEqual({ resolution: '1080p', audio: true, tier: 'flex', input: 'reference' });
  expect(askedDims({ images: { inputReference: {} } })).toEqual({ input: 'image' });
  expect(deliveredDims(asked, { resolution: '720p', audio: undefined })).toEqual({ ...asked, resolution: '720p' });
});

test("the default catalog's tables: Veo by resolution and audio, a cheaper fast tier, Seedance by tier", () => {
  const veo = catalogPricing('veo-3.1-generate-preview');
  const fast = catalogPricing('veo-3.1-fast-generate-preview');
  const seedance = catalogPricing('seedance-2-0');
  for (const m of [veo, fast]) {
    // 720p and 1080p share a price; 4k costs more; without audio costs less.
    expect(videoSecondPrice(m, { resolution: '720p', audio: true })).toBe(
      videoSecondPrice(m, { resolution: '1080p', audio: true }),
    );
    expect(videoSecondPrice(m, { resolution: '4k', audio: true })).toBeGreaterThan(
      videoSecondPrice(m, { resolution: '1080p', audio: true }),
    );
    expect(videoSecondPrice(m, { resolution: '720p', audio: false })).toBeLessThan(
      videoSecondPrice(m, { resolution: '720p', audio: true }),
    );
    // A job without a size may come back at 4k: held at that price; a 720p one at its own.
    expect(videoHoldPrice(m, { input: 'text' })).toBe(videoSecondPrice(m, { resolution: '4k', audio: true }));
    expect(videoHoldPrice(m, { resolution: '720p', input: 'text' })).toBe(
      videoSecondPrice(m, { resolution: '720p', audio: true }),
    );
  }
  expect(videoSecondPrice(fast, { resolution: '720p', audio: true })).toBeLessThan(
    videoSecondPrice(veo, { resolution: '720p', audio: true }),
  );
  const sd = (resolution: string, tier = 'default') => videoSecondPrice(seedance, { resolution, audio: true, tier });
  expect(sd('480p')).toBeLessThan(sd('720p'));
  expect(sd('720p')).toBeLessThan(sd('1080p'));
  for (const r of ['480p', '720p', '1080p']) expect(sd(r, 'flex')).toBeLessThan(sd(r));
  // The tier left open (no service_tier asked): held at the default tier's price, the dearer one.
  expect(videoHoldPrice(seedance, { resolution: '720p', audio: true, input: 'text' })).toBe(sd('720p'));
});
