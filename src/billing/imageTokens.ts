import type { ModelConfig } from '../catalog';

/**
 * Prompt tokens an image costs, by the rule of the provider family that serves the model, for the funds bound:
 * an image sent by URL is a few bytes of the request but hundreds or tens of thousands of tokens upstream.
 *
 * - OpenAI tiles (gpt-4o, gpt-4.1, o1/o3, gpt-5): detail low = the base; otherwise the image is fitted in
 *   2048 x 2048, its shortest side brought down to 768, and each 512 px tile costs the tile price, plus the base.
 *   gpt-4o-mini bills images at 2833 + 5667 per tile (the price of gpt-4o's tokens at its own token price).
 * - OpenAI patches (gpt-4.1-mini/nano, o4-mini, gpt-5-mini/nano): 32 px patches, at most 1536, times a multiplier.
 * - Anthropic: width x height / 750 after fitting the long edge in 1568 px and the tokens in 1600.
 * - Gemini: 258 for an image within 384 x 384, else 258 per 768 x 768 tile.
 * The size is read from an inline image's header (PNG, JPEG, GIF, WebP); an image by URL is counted at the worst
 * size its rule allows. Audio, files and documents, and images for models of no known family, count
 * OTHER_PART_TOKENS.
 */

export const OTHER_PART_TOKENS = 2000;

export interface MediaPart {
  kind: 'image' | 'other';
  detail: 'low' | 'high' | 'auto';
  width?: number;
  height?: number;
}

type Rule =
  | { family: 'tiles'; base: number; tile: number }
  | { family: 'patches'; multiplier: number }
  | { family: 'anthropic' }
  | { family: 'gemini' }
  | { family: 'unknown' };

const RULES: [RegExp, Rule][] = [
  [/claude/, { family: 'anthropic' }],
  [/gemini/, { family: 'gemini' }],
  [/gpt-4o-mini/, { family: 'tiles', base: 2833, tile: 5667 }],
  [/gpt-4\.1-nano|gpt-5-nano/, { family: 'patches', multiplier: 2.46 }],
  [/gpt-4\.1-mini|gpt-5-mini/, { family: 'patches', multiplier: 1.62 }],
  [/o4-mini/, { family: 'patches', multiplier: 1.72 }],
  [/^(o1|o3)/, { family: 'tiles', base: 75, tile: 150 }],
  [/gpt-5/, { family: 'tiles', base: 70, tile: 140 }],
  [/gpt-4o|gpt-4\.1|gpt-4\.5|gpt-4-turbo|vision/, { family: 'tiles', base: 85, tile: 170 }],
];

const ruleCache = new WeakMap<ModelConfig, Rule>();
function ruleOf(model: ModelConfig): Rule {
  let r = ruleCache.get(model);
  if (!r) {
    const name = (model.upstreamModel || model.id).toLowerCase();
    r = RULES.find(([re]) => re.test(name))?.[1] ?? { family: 'unknown' };
    ruleCache.set(model, r);
  }
  return r;
}

/** OpenAI's tile count for a high-detail image of w x h. */
function tiles(w: number, h: number): number {
  let s = Math.min(1, 2048 / Math.max(w, h));
  [w, h] = [w * s, h * s];
  s = Math.min(1, 768 / Math.min(w, h));
  return Math.ceil((w * s) / 512) * Math.ceil((h * s) / 512);
}

function patches(w: number, h: number): number {
  const n = Math.ceil(w / 32) * Math.ceil(h / 32);
  if (n <= 1536) return n;
  // Scaled down to fit 1536 patches, a whole number of patches on the width.
  let s = Math.sqrt((1536 * 32 * 32) / (w * h));
  s *= Math.floor((w * s) / 32) / ((w * s) / 32);
  return Math.min(1536, Math.ceil((w * s) / 32) * Math.ceil((h * s) / 32));
}

function anthropicTokens(w: number, h: number): number {
  const s = Math.min(1, 1568 / Math.max(w, h), Math.sqrt(1_200_000 / (w * h)));
  return Math.min(1600, Math.ceil((w * s * (h * s)) / 750));
}

/** Tokens one media part costs at `model`'s provider (an upper bound when its size is unknown). */
export function partTokens(model: ModelConfig, p: MediaPart): number {
  if (p.kind !== 'image') return OTHER_PART_TOKENS;
  const r = ruleOf(model);
  const sized = p.width && p.height ? { w: p.width, h: p.height } : null;
  switch (r.family) {
    case 'tiles':
      if (p.detail === 'low') return r.base;
      return r.base + r.tile * (sized ? tiles(sized.w, sized.h) : 8);
    case 'patches':
      return Math.ceil(r.multiplier * (sized ? patches(sized.w, sized.h) : 1536));
    case 'anthropic':
      return sized ? anthropicTokens(sized.w, sized.h) : 1600;
    case 'gemini':
      if (!sized) return OTHER_PART_TOKENS;
      return sized.w <= 384 && sized.h <= 384 ? 258 : 258 * Math.ceil(sized.w / 768) * Math.ceil(sized.h / 768);
    default:
      return OTHER_PART_TOKENS;
  }
}

/** Tokens of every media part at `model` (a bare count: each at its worst size). */
export function mediaTokens(model: ModelConfig, parts: readonly MediaPart[] | number): number {
  if (typeof parts === 'number') return parts * partTokens(model, { kind: 'image', detail: 'auto' });
  let n = 0;
  for (const p of parts) n += partTokens(model, p);
  return n;
}

/** Width and height from the first bytes of a PNG, JPEG, GIF or WebP image; null when not found. */
export function imageSize(b: Buffer): { width: number; height: number } | null {
  if (b.length >= 24 && b.readUInt32BE(0) === 0x89504e47)
    return { width: b.readUInt32BE(16), height: b.readUInt32BE(20) };
  if (b.length >= 10 && b.toString('latin1', 0, 4) === 'GIF8')
    return { width: b.readUInt16LE(6), height: b.readUInt16LE(8) };
  if (b.length >= 30 && b.toString('latin1', 0, 4) === 'RIFF' && b.toString('latin1', 8, 12) === 'WEBP') {
    const chunk = b.toString('latin1', 12, 16);
    if (chunk === 'VP8 ') return { width: b.readUInt16LE(26) & 0x3fff, height: b.readUInt16LE(28) & 0x3fff };
    if (chunk === 'VP8L') {
      const v = b.readUInt32LE(21);
      return { width: (v & 0x3fff) + 1, height: ((v >> 14) & 0x3fff) + 1 };
    }
    if (chunk === 'VP8X') return { width: 1 + b.readUIntLE(24, 3), height: 1 + b.readUIntLE(27, 3) };
    return null;
  }
  if (b.length >= 4 && b[0] === 0xff && b[1] === 0xd8) {
    let i = 2;
    while (i + 9 < b.length) {
      if (b[i] !== 0xff) return null;
      const m = b[i + 1];
      if (m >= 0xc0 && m <= 0xcf && m !== 0xc4 && m !== 0xc8 && m !== 0xcc)
        return { width: b.readUInt16BE(i + 7), height: b.readUInt16BE(i + 5) };
      i += 2 + b.readUInt16BE(i + 2);
    }
  }
  return null;
}

/** The size of a base64 image: only its first bytes are decoded (a JPEG's size may follow its metadata). */
function base64Size(data: unknown): { width?: number; height?: number } {
  if (typeof data !== 'string') return {};
  const s = imageSize(Buffer.from(data.slice(0, 87_380), 'base64'));
  return s && s.width > 0 && s.height > 0 ? s : {};
}

function fromUrl(url: unknown): { width?: number; height?: number } {
  if (typeof url !== 'string' || !url.startsWith('data:')) return {};
  const comma = url.indexOf(',');
  return comma > 0 && url.slice(0, comma).endsWith(';base64') ? base64Size(url.slice(comma + 1)) : {};
}

const detailOf = (d: unknown): MediaPart['detail'] => (d === 'low' || d === 'high' ? d : 'auto');

/** One part's media description, or null for text and other non-media parts. */
function mediaPart(o: Record<string, unknown>): MediaPart | null {
  switch (o.type) {
    case 'image_url': {
      const iu = o.image_url as { url?: unknown; detail?: unknown } | string | undefined;
      if (typeof iu === 'string') return { kind: 'image', detail: 'auto', ...fromUrl(iu) };
      return { kind: 'image', detail: detailOf(iu?.detail), ...fromUrl(iu?.url) };
    }
    case 'input_image':
      return { kind: 'image', detail: detailOf(o.detail), ...fromUrl(o.image_url) };
    case 'image': {
      const src = o.source as { type?: unknown; data?: unknown } | undefined;
      return { kind: 'image', detail: 'auto', ...(src?.type === 'base64' ? base64Size(src.data) : {}) };
    }
    case 'input_audio':
    case 'file':
    case 'document':
    case 'input_file':
      return { kind: 'other', detail: 'auto' };
    default:
      return null;
  }
}

/**
 * The media parts (images, audio, files, documents) anywhere in chat messages, Anthropic messages or Responses
 * input items: parts of a `content` (or a tool result's `content` / `output`) list.
 */
export function mediaParts(v: unknown, out: MediaPart[] = [], depth = 0): MediaPart[] {
  if (depth > 8 || v === null || typeof v !== 'object') return out;
  if (Array.isArray(v)) {
    for (const x of v) mediaParts(x, out, depth + 1);
    return out;
  }
  const o = v as Record<string, unknown>;
  const p = mediaPart(o);
  if (p) out.push(p);
  for (const k of ['content', 'output']) if (Array.isArray(o[k])) mediaParts(o[k], out, depth + 1);
  return out;
}
