import fs from 'node:fs';
import path from 'node:path';
import type { CatalogFile, PriceSet } from '../../src/catalog/catalog';
import { videoHoldPrice, videoSecondPrice, type VideoDims } from '../../src/billing/videoPricing';

/**
 * Video prices as the default catalog (config/catalog.json) sets them, so tests compute what a job is held and
 * charged from the catalog's table instead of repeating its numbers.
 */

const file = JSON.parse(fs.readFileSync(path.join(__dirname, '../../config/catalog.json'), 'utf8')) as CatalogFile;

/** The default catalog's prices of video model `id`. */
export function catalogPricing(id: string): PriceSet {
  const m = file.models.find((x) => x.id === id);
  if (!m) throw new Error(`no model ${id} in config/catalog.json`);
  return m.pricing as PriceSet;
}

/** The price per second a job of `id` is held at when asked as `asked` (an absent dimension is left open). */
export const holdPerSecond = (id: string, asked: VideoDims): number => videoHoldPrice(catalogPricing(id), asked);

/** The price per second a job of `id` is charged at when delivered as `delivered`. */
export const chargePerSecond = (id: string, delivered: VideoDims): number =>
  videoSecondPrice(catalogPricing(id), delivered);
