import type { PriceSet, VideoSecondPrice } from '../catalog';

/**
 * Video prices per second by the dimensions providers price (resolution, audio, tier, input mode). The hold is
 * taken at the highest price of anything the request could be delivered as (a dimension it leaves open may come
 * back as any value); the charge at the price of what the provider reports it delivered. A catalog without a
 * table prices every second at `perVideoSecond`.
 */

/** What a completed job was charged on: the delivered dimensions, the seconds, the price and its version. */
export interface VideoBilled {
  seconds: number;
  resolution: string | null;
  audio: boolean | null;
  tier: string | null;
  input: string | null;
  pricePerSecond: number;
  priceVersion: number | null;
}

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

/** A value no row names: what a provider may deliver for an open dimension beyond the table's values. */
const OTHER = '\u0000other';

/**
 * The highest price per second a request asked as `asked` can be delivered at: each dimension it leaves open may
 * come back as any value (those the table names, any other, both audio states, every input mode), and each
 * possible delivery is priced as a delivery is (first matching row, else perVideoSecond).
 */
export function videoHoldPrice(p: PriceSet, asked: VideoDims): number {
  const rows = p.videoPerSecond ?? [];
  const options = (k: (typeof DIMS)[number]): unknown[] => {
    if (asked[k] !== undefined) return [asked[k]];
    if (k === 'audio') return [true, false];
    if (k === 'input') return ['text', 'image', 'reference'];
    return [...new Set(rows.map((r) => r[k]).filter((v) => v !== undefined)), OTHER];
  };
  let combos: VideoDims[] = [{}];
  for (const k of DIMS) combos = combos.flatMap((c) => options(k).map((v) => ({ ...c, [k]: v })));
  return Math.max(...combos.map((d) => videoSecondPrice(p, d)));
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
