import type { PriceSet, VideoSecondPrice } from '../catalog/catalog';

/**
 * Video prices per second by the dimensions providers price (resolution, audio, tier, input mode). The hold is
 * taken at the highest price of anything the request could be delivered as (a dimension it leaves open may come
 * back as any value); the charge at the price of what the provider reports it delivered. A catalog without a
 * table prices every second at `perVideoSecond`.
 */

/** What a video job is (or may be) priced by; an undefined dimension is unknown (asked: left to the provider). */
export interface VideoDims {
  resolution?: string;
  audio?: boolean;
  tier?: string;
  input?: 'text' | 'image' | 'reference';
}

const DIMS = ['resolution', 'audio', 'tier', 'input'] as const;

/** The row that prices delivered `d`: the first whose every named dimension equals d's; none: null. */
function rowFor(p: PriceSet, d: VideoDims): VideoSecondPrice | null {
  for (const row of p.videoPerSecond ?? []) {
    if (DIMS.every((k) => row[k] === undefined || row[k] === d[k])) return row;
  }
  return null;
}

/** The price per second of a video delivered as `d` (its table row, else perVideoSecond). */
export function videoSecondPrice(p: PriceSet, d: VideoDims): number {
  return rowFor(p, d)?.perSecond ?? p.perVideoSecond ?? 0;
}

/**
 * The highest price per second a request asked as `asked` can be delivered at: the highest of the rows it could
 * match (a row naming a dimension the request left open could apply), and perVideoSecond when no row surely
 * applies (what was delivered may then match none).
 */
export function videoHoldPrice(p: PriceSet, asked: VideoDims): number {
  let max = -1;
  let covered = false;
  for (const row of p.videoPerSecond ?? []) {
    if (!DIMS.every((k) => row[k] === undefined || asked[k] === undefined || row[k] === asked[k])) continue;
    max = Math.max(max, row.perSecond);
    // A row whose every dimension is fixed by the request (or open in the row) is sure to price what was asked.
    if (DIMS.every((k) => row[k] === undefined || asked[k] !== undefined)) covered = true;
  }
  return covered ? max : Math.max(max, p.perVideoSecond ?? 0);
}

/** The dimensions of a job's request (resolution, audio switch, input mode, a `service_tier` pass-through). */
export function askedDims(r: {
  resolution?: string;
  generateAudio?: boolean;
  parameters?: Record<string, unknown>;
  images?: { inputReference?: unknown; lastFrame?: unknown; referenceImages?: unknown[] };
}): VideoDims {
  const tier = r.parameters?.service_tier;
  const input = r.images?.referenceImages?.length
    ? 'reference'
    : r.images?.inputReference || r.images?.lastFrame
      ? 'image'
      : 'text';
  return {
    ...(r.resolution !== undefined ? { resolution: r.resolution } : {}),
    ...(r.generateAudio !== undefined ? { audio: r.generateAudio } : {}),
    ...(typeof tier === 'string' ? { tier } : {}),
    input,
  };
}

/** What the job is billed by: what the provider reports it delivered, else what was asked. */
export function deliveredDims(asked: VideoDims, reported: VideoDims): VideoDims {
  const out: VideoDims = { ...asked };
  for (const k of DIMS) if (reported[k] !== undefined) (out as Record<string, unknown>)[k] = reported[k];
  return out;
}
