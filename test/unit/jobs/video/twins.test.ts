import { twinCostVnd } from '../../../../src/jobs/video/twins';
import type { PriceSet } from '../../../../src/catalog/catalog';

/** A twin's cost to the gateway: its delivered seconds at the price of its delivered dimensions (the job's table). */

const pricing: PriceSet = {
  perVideoSecond: 7000,
  videoPerSecond: [
    { resolution: '4k', perSecond: 9000 },
    { resolution: '1080p', audio: false, perSecond: 4000 },
    { resolution: '1080p', perSecond: 5000 },
    { resolution: '720p', perSecond: 2000 },
  ],
};
const request = { prompt: 'p', seconds: 8, returnLastFrame: false, images: {}, resolution: '1080p' };
const job = { seconds: 8, pricePerSecond: 9000, pricing, request };

test('priced at what the twin delivered, not at the hold price', () => {
  expect(twinCostVnd('succeeded', { durationSeconds: 4, resolution: '720p', generateAudio: true }, job)).toBe(4 * 2000);
  expect(twinCostVnd('succeeded', { durationSeconds: 8, resolution: '1080p', generateAudio: false }, job)).toBe(
    8 * 4000,
  );
  // Fractional seconds are billed up, as the job's charge is.
  expect(twinCostVnd('succeeded', { durationSeconds: 4.2, resolution: '720p' }, job)).toBe(5 * 2000);
});

test('nothing reported: the seconds and dimensions the job asked; no table (an older job): its one price', () => {
  expect(twinCostVnd('unknown', {}, job)).toBe(8 * 5000);
  expect(twinCostVnd('running', { durationSeconds: null }, job)).toBe(8 * 5000);
  expect(
    twinCostVnd('succeeded', { durationSeconds: 4, resolution: '720p' }, { seconds: 8, pricePerSecond: 3600 }),
  ).toBe(4 * 3600);
});

test('a twin that produced nothing costs nothing', () => {
  for (const s of ['failed', 'cancelled', 'expired'] as const)
    expect(twinCostVnd(s, { durationSeconds: 8 }, job)).toBe(0);
});
