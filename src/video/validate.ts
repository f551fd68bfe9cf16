import { badRequest, ApiError } from '../errors';
import type { Catalog, ModelConfig } from '../catalog/catalog';
import { findUnstorableText, unstorableTextMessage } from '../text/pgText';
import type { VideoImages, VideoRequest } from './params';
import { formNameMessage, formNamePath, formNameProblem } from '../schemas/bodyShape';
import { clip, clipJson } from '../text/clip';

/**
 * Validation of POST /v1/videos (spec 4.1 and 8). Every rejection is a 400 naming the parameter. The checks
 * that need no I/O run first (validateVideoRequest); images are decoded/fetched afterwards (loadImages), so a
 * request with a bad `seconds` never costs a URL fetch.
 */

export const MAX_PROMPT_CHARS = 10_000;
export const MAX_REFERENCE_IMAGES = 9;
export const RESOLUTIONS = ['480p', '720p', '1080p', '4k'] as const;
export const DEFAULT_RESOLUTION = '720p';
/** The catalog family whose models accept last_frame, reference_images, resolution, watermark, return_last_frame. */
export const REFERENCE_FAMILY = 'seedance';

const FIELDS = new Set([
  'model',
  'prompt',
  'seconds',
  'size',
  'input_reference',
  'last_frame',
  'reference_images',
  'resolution',
  'seed',
  'generate_audio',
  'watermark',
  'return_last_frame',
  'parameters',
]);
const REFERENCE_ONLY = ['last_frame', 'reference_images', 'resolution', 'watermark', 'return_last_frame'] as const;

/** Aspect ratios each provider kind accepts. */
const RATIOS: Record<string, string[]> = {
  veo: ['16:9', '9:16'],
  seedance: ['16:9', '4:3', '1:1', '3:4', '9:16', '21:9'],
};
/** Pass-through keys that would contradict a gateway field (or what we bill), per provider kind. */
const RESERVED_PARAMETERS: Record<string, Record<string, string>> = {
  veo: {
    durationSeconds: 'seconds',
    sampleCount: '',
    aspectRatio: 'size',
    resolution: 'size',
    seed: 'seed',
    generateAudio: 'generate_audio',
  },
  seedance: {
    model: 'model',
    content: 'prompt',
    duration: 'seconds',
    frames: 'seconds',
    resolution: 'resolution',
    ratio: 'size',
    seed: 'seed',
    generate_audio: 'generate_audio',
    watermark: 'watermark',
    return_last_frame: 'return_last_frame',
    callback_url: '',
  },
};

/** An image as given by the caller, before decoding. */
export type ImageSource =
  | { kind: 'string'; value: string }
  | { kind: 'object'; bytesBase64Encoded: string; mimeType: string }
  | { kind: 'file'; path: string; size: number; mimeType: string | null };

/** A decoded image: PNG, JPEG or WebP by magic bytes, at most 10 MB. */
export interface LoadedImage {
  bytes: Buffer;
  mimeType: string;
}
/** Decodes or fetches one image; throws an ApiError (400 naming `param`) when it is not acceptable. */
export type ImageLoader = (src: ImageSource, param: string) => Promise<LoadedImage>;

export interface ValidVideoRequest {
  model: ModelConfig;
  request: VideoRequest<ImageSource>;
  /** seconds x the model's price per second: the hold placed at submission. */
  maxCostVnd: number;
}

const bad = (param: string, message: string, code = 'invalid_value') => badRequest(message, param, code);
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function integer(v: unknown, param: string, what: string): number {
  if (typeof v === 'number' && Number.isSafeInteger(v)) return v;
  // The official openai SDK sends `seconds` as a string ("8"), and multipart forms send every field as one.
  if (typeof v === 'string' && /^-?\d{1,15}$/.test(v.trim())) return Number(v.trim());
  throw bad(
    param,
    `Invalid '${param}': expected ${what}, got ${JSON.stringify(v)?.slice(0, 50) ?? typeof v}.`,
    'invalid_type',
  );
}

function boolean(v: unknown, param: string, fromForm: boolean): boolean {
  if (typeof v === 'boolean') return v;
  if (fromForm && (v === 'true' || v === 'false')) return v === 'true';
  throw bad(
    param,
    `Invalid '${param}': expected a boolean, got ${JSON.stringify(v)?.slice(0, 50) ?? typeof v}.`,
    'invalid_type',
  );
}

function gcd(a: number, b: number): number {
  return b === 0 ? a : gcd(b, a % b);
}

/** `WxH` or `W:H` -> the provider's nearest supported ratio (within 2 %) and, for WxH, the implied resolution. */
function parseSize(size: unknown, kind: string, family: string): { aspectRatio: string; impliedResolution?: string } {
  if (typeof size !== 'string')
    throw bad('size', `Invalid 'size': expected a string such as "1280x720" or "16:9".`, 'invalid_type');
  const m = /^\s*(\d{1,5})\s*([xX×:])\s*(\d{1,5})\s*$/.exec(size);
  if (!m || Number(m[1]) === 0 || Number(m[3]) === 0)
    throw bad(
      'size',
      `Invalid 'size' ${clipJson(size)}: use <width>x<height> (e.g. "1280x720") or <w>:<h> (e.g. "16:9").`,
    );
  const w = Number(m[1]);
  const h = Number(m[3]);
  const ratios = RATIOS[kind] ?? RATIOS.seedance;
  let best: string | null = null;
  let err = Infinity;
  for (const r of ratios) {
    const [a, b] = r.split(':').map(Number);
    const e = Math.abs(w / h / (a / b) - 1);
    if (e < err) {
      err = e;
      best = r;
    }
  }
  const g = gcd(w, h);
  if (!best || err > 0.02)
    throw bad(
      'size',
      `The size ${clipJson(size)} (aspect ratio ${w / g}:${h / g}) is not supported by this model; supported aspect ratios: ${ratios.join(', ')}.`,
    );
  if (m[2] === ':') return { aspectRatio: best };
  const short = Math.min(w, h);
  const tiers: [number, string][] =
    family === REFERENCE_FAMILY
      ? [
          [480, '480p'],
          [720, '720p'],
          [1080, '1080p'],
          [2160, '4k'],
        ]
      : [
          [720, '720p'],
          [1080, '1080p'],
          [2160, '4k'],
        ];
  let tier = tiers[0];
  for (const t of tiers) if (Math.abs(t[0] - short) < Math.abs(tier[0] - short)) tier = t;
  return { aspectRatio: best, impliedResolution: tier[1] };
}

function imageSource(v: unknown, param: string): ImageSource {
  if (typeof v === 'string') {
    if (v.trim() === '')
      throw bad(param, `Invalid '${param}': empty string; give a data URI, a URL or {bytesBase64Encoded, mimeType}.`);
    return { kind: 'string', value: v.trim() };
  }
  if (isObject(v)) {
    if ('__file' in v && isObject(v.__file)) {
      const f = v.__file as { path: string; size: number; mimeType: string | null };
      return { kind: 'file', path: f.path, size: f.size, mimeType: f.mimeType };
    }
    // The official openai SDK's own shape for a URL reference: {image_url: "..."}.
    if (typeof v.image_url === 'string' && Object.keys(v).length === 1) return imageSource(v.image_url, param);
    const extra = Object.keys(v).filter((k) => k !== 'bytesBase64Encoded' && k !== 'mimeType');
    if (typeof v.bytesBase64Encoded === 'string' && typeof v.mimeType === 'string' && extra.length === 0) {
      return { kind: 'object', bytesBase64Encoded: v.bytesBase64Encoded, mimeType: v.mimeType };
    }
  }
  throw bad(
    param,
    `Invalid '${param}': expected a data URI or URL string, or an object {bytesBase64Encoded, mimeType}.`,
    'invalid_type',
  );
}

/**
 * Checks a create request's fields against the model (no I/O). `fromForm` marks a multipart body, whose
 * values all arrive as strings.
 */
export function validateVideoRequest(
  body: Record<string, unknown>,
  catalog: Catalog,
  fromForm = false,
): ValidVideoRequest {
  const model = catalog.require(body.model, 'video');
  const provider = catalog.provider(model);
  const kind = provider.kind;
  const family = model.family ?? kind;
  const referenceFamily = family === REFERENCE_FAMILY;

  for (const k of Object.keys(body)) {
    if (!FIELDS.has(k)) throw bad(k, `Unrecognized request argument supplied: ${clip(k)}`, 'unknown_parameter');
  }

  const prompt = checkPrompt(body.prompt);

  // seconds
  const allowed = model.allowedDurations!;
  let seconds = model.defaultDuration ?? allowed[0];
  if (body.seconds !== undefined && body.seconds !== null && body.seconds !== '') {
    seconds = integer(body.seconds, 'seconds', 'an integer number of seconds');
    if (!allowed.includes(seconds))
      throw bad(
        'seconds',
        `Invalid 'seconds' ${seconds}: the model '${model.id}' allows ${allowed.join(', ')} seconds.`,
      );
  }

  // fields only the reference-capable family accepts
  if (!referenceFamily) {
    for (const f of REFERENCE_ONLY) {
      if (body[f] !== undefined && body[f] !== null) {
        throw bad(
          f,
          `'${f}' is only supported by the reference-capable (${REFERENCE_FAMILY}) video models; the model '${model.id}' does not support it.`,
          'unsupported_parameter',
        );
      }
    }
  }

  // seed and generate_audio: Veo on the Gemini API cannot honour them; say so rather than drop them silently.
  let seed: number | undefined;
  if (body.seed !== undefined && body.seed !== null) {
    if (kind === 'veo')
      throw bad(
        'seed',
        `The model '${model.id}' (Google Veo via the Gemini API) cannot honour 'seed'; remove it.`,
        'unsupported_parameter',
      );
    seed = integer(body.seed, 'seed', 'an integer');
    if (seed < -1 || seed > 2147483647) throw bad('seed', "Invalid 'seed': must be between -1 and 2147483647.");
  }
  let generateAudio: boolean | undefined;
  if (body.generate_audio !== undefined && body.generate_audio !== null) {
    generateAudio = boolean(body.generate_audio, 'generate_audio', fromForm);
    if (kind === 'veo') {
      if (!generateAudio)
        throw bad(
          'generate_audio',
          `The model '${model.id}' (Google Veo) always generates audio; generate_audio=false cannot be honoured.`,
          'unsupported_parameter',
        );
      generateAudio = undefined; // honoured by default; nothing to send
    } else if (!referenceFamily) {
      throw bad(
        'generate_audio',
        `The model '${model.id}' has no audio switch; 'generate_audio' cannot be honoured.`,
        'unsupported_parameter',
      );
    }
  } else if (referenceFamily) {
    generateAudio = true;
  }

  // size and resolution
  let aspectRatio: string | undefined;
  let resolution: string | undefined;
  let implied: string | undefined;
  if (body.size !== undefined && body.size !== null && body.size !== '') {
    const s = parseSize(body.size, kind, family);
    aspectRatio = s.aspectRatio;
    implied = s.impliedResolution;
  }
  if (referenceFamily) {
    if (body.resolution !== undefined && body.resolution !== null) {
      if (typeof body.resolution !== 'string' || !(RESOLUTIONS as readonly string[]).includes(body.resolution)) {
        throw bad(
          'resolution',
          `Invalid 'resolution' ${clipJson(body.resolution)}: use one of ${RESOLUTIONS.join(', ')}.`,
        );
      }
      resolution = body.resolution;
      if (implied && implied !== resolution)
        throw bad(
          'size',
          `The size ${clipJson(body.size)} implies ${implied} but 'resolution' is ${resolution}; give a matching size or a ratio such as "16:9".`,
        );
    } else {
      resolution = implied ?? DEFAULT_RESOLUTION;
    }
  } else if (implied) {
    resolution = implied;
    // Veo 3.x renders 1080p and 4k only as 8-second clips.
    if (kind === 'veo' && implied !== '720p' && seconds !== 8)
      throw bad(
        'seconds',
        `Veo renders ${implied} (size ${clipJson(body.size)}) only as 8-second videos; set seconds to 8 or use a 720p size.`,
      );
  }

  let watermark: boolean | undefined;
  if (body.watermark !== undefined && body.watermark !== null)
    watermark = boolean(body.watermark, 'watermark', fromForm);
  let returnLastFrame = false;
  if (body.return_last_frame !== undefined && body.return_last_frame !== null)
    returnLastFrame = boolean(body.return_last_frame, 'return_last_frame', fromForm);

  const images = imageSources(body);

  const parameters = passThroughParameters(body.parameters, kind, fromForm);

  const price = model.pricing.perVideoSecond!;
  const maxCostVnd = seconds * price;
  if (!Number.isSafeInteger(maxCostVnd))
    throw new ApiError(500, 'The model price is misconfigured.', 'server_error', null, 'pricing_error');
  const size = typeof body.size === 'string' && body.size !== '' ? body.size : undefined;
  return {
    model,
    maxCostVnd,
    request: {
      prompt,
      seconds,
      size,
      aspectRatio,
      resolution,
      seed,
      generateAudio,
      watermark,
      returnLastFrame,
      parameters,
      images,
    },
  };
}

/** The prompt: a non-empty string of at most MAX_PROMPT_CHARS characters that Postgres can store. */
function checkPrompt(prompt: unknown): string {
  if (prompt === undefined || prompt === null)
    throw bad('prompt', "Missing required parameter: 'prompt'.", 'missing_required_parameter');
  if (typeof prompt !== 'string') throw bad('prompt', "Invalid 'prompt': expected a string.", 'invalid_type');
  if (prompt.trim() === '') throw bad('prompt', "Invalid 'prompt': must not be empty.");
  // The job's request is kept in jsonb, which cannot hold these; and no provider reads them as text either.
  if (findUnstorableText(prompt, 'prompt')) throw bad('prompt', unstorableTextMessage('prompt'));
  const chars = [...prompt].length;
  if (chars > MAX_PROMPT_CHARS)
    throw bad(
      'prompt',
      `Invalid 'prompt': ${chars} characters, at most ${MAX_PROMPT_CHARS} allowed.`,
      'string_above_max_length',
    );
  return prompt;
}

/** The image inputs as given (decoded later by loadImages): a first frame, a last frame after it, or reference images. */
function imageSources(body: Record<string, unknown>): VideoImages<ImageSource> {
  const images: VideoImages<ImageSource> = {};
  const has = (k: string) => body[k] !== undefined && body[k] !== null && body[k] !== '';
  if (has('input_reference')) images.inputReference = imageSource(body.input_reference, 'input_reference');
  if (has('last_frame')) {
    if (!images.inputReference)
      throw bad(
        'last_frame',
        "'last_frame' requires 'input_reference' (the first frame).",
        'missing_required_parameter',
      );
    images.lastFrame = imageSource(body.last_frame, 'last_frame');
  }
  if (has('reference_images')) {
    const refs = body.reference_images;
    if (!Array.isArray(refs))
      throw bad(
        'reference_images',
        "Invalid 'reference_images': expected an array of URLs or data URIs.",
        'invalid_type',
      );
    if (refs.length > MAX_REFERENCE_IMAGES)
      throw bad(
        'reference_images',
        `Invalid 'reference_images': ${refs.length} images, at most ${MAX_REFERENCE_IMAGES} allowed.`,
        'array_above_max_length',
      );
    if (refs.length > 0) {
      if (images.inputReference)
        throw bad(
          'reference_images',
          "'reference_images' cannot be combined with 'input_reference': use either a first frame or reference images.",
          'invalid_combination',
        );
      images.referenceImages = refs.map((r, i) => {
        if (typeof r !== 'string')
          throw bad(
            `reference_images[${i}]`,
            `Invalid 'reference_images[${i}]': expected a URL or data URI string.`,
            'invalid_type',
          );
        return imageSource(r, `reference_images[${i}]`);
      });
    }
  }
  return images;
}

/** Pass-through parameters for the provider, except keys that would contradict a gateway field (or what we bill). */
function passThroughParameters(
  parameters: unknown,
  kind: string,
  fromForm: boolean,
): Record<string, unknown> | undefined {
  if (parameters === undefined || parameters === null) return undefined;
  if (!isObject(parameters)) throw bad('parameters', "Invalid 'parameters': expected an object.", 'invalid_type');
  const unstorable = findUnstorableText(parameters, 'parameters');
  if (unstorable) throw bad(unstorable, unstorableTextMessage(unstorable));
  const reserved = RESERVED_PARAMETERS[kind] ?? {};
  for (const k of Object.keys(parameters)) {
    if (k in reserved) {
      const field = reserved[k];
      throw bad(
        `parameters.${k}`,
        field
          ? `'parameters.${k}' cannot be passed through: set the gateway field '${field}' instead${kind === 'veo' && (k === 'seed' || k === 'generateAudio') ? ' (which Veo on the Gemini API cannot honour)' : ''}.`
          : `'parameters.${k}' is controlled by the gateway and cannot be passed through.`,
        'unsupported_parameter',
      );
    }
  }
  return fromForm ? coerceFormValues(parameters) : parameters;
}

/** Multipart pass-through values arrive as strings: turn "true"/"false"/numbers back into JSON values. */
function coerceFormValues(o: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o)) {
    if (typeof v === 'string') {
      if (v === 'true' || v === 'false') out[k] = v === 'true';
      else if (/^-?\d+(\.\d+)?$/.test(v) && Number.isFinite(Number(v))) out[k] = Number(v);
      else out[k] = v;
    } else if (isObject(v)) out[k] = coerceFormValues(v);
    else out[k] = v;
  }
  return out;
}

/** Decodes/fetches every image of a validated request (each failure is a 400 naming its parameter). */
export async function loadImages(
  images: VideoImages<ImageSource>,
  load: ImageLoader,
): Promise<VideoImages<LoadedImage>> {
  const [inputReference, lastFrame, referenceImages] = await Promise.all([
    images.inputReference ? load(images.inputReference, 'input_reference') : undefined,
    images.lastFrame ? load(images.lastFrame, 'last_frame') : undefined,
    images.referenceImages
      ? Promise.all(images.referenceImages.map((s, i) => load(s, `reference_images[${i}]`)))
      : undefined,
  ]);
  return { inputReference, lastFrame, referenceImages };
}

/**
 * Turns a multipart form (bracket notation as the official SDKs send it: `a[b]`, `a[]`) into the JSON-shaped
 * body validateVideoRequest takes. Uploaded files become `{__file}` image sources. multipartBody refuses names
 * nested too deep or naming a prototype; they are refused here too, since this walk is what they would attack.
 */
export function formToBody(
  fields: Record<string, unknown>,
  files: Record<string, { path: string; size: number; mimeType: string | null }>,
): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  const set = (name: string, value: unknown) => {
    const problem = formNameProblem(name);
    if (problem) throw new ApiError(400, formNameMessage(problem), 'invalid_request_error', null, 'invalid_multipart');
    const path = formNamePath(name);
    if (!path) {
      body[name] = value;
      return;
    }
    let node: Record<string, unknown> = body;
    for (let i = 0; i < path.length; i++) {
      const key = path[i];
      const last = i === path.length - 1;
      const nextIsArray = !last && path[i + 1] === '';
      if (key === '') continue; // handled by the parent (array push)
      if (last) {
        node[key] = value;
      } else if (nextIsArray) {
        const arr = Array.isArray(node[key]) ? (node[key] as unknown[]) : [];
        node[key] = arr;
        if (i + 1 === path.length - 1) arr.push(value);
        return;
      } else {
        if (!isObject(node[key])) node[key] = {};
        node = node[key] as Record<string, unknown>;
      }
    }
  };
  for (const [k, v] of Object.entries(fields)) {
    for (const one of Array.isArray(v) ? v : [v]) set(k, one);
  }
  for (const [k, f] of Object.entries(files)) set(k, { __file: f });
  return body;
}
