import { badRequest, ApiError } from '../../errors';
import type { Catalog, ModelConfig } from '../../catalog';
import { wireOf } from '../../providers';
import { clip, clipJson } from '../../text';
import { findUnstorableText, unstorableTextMessage } from '../../db';
import type { VideoImages, VideoRequest } from '../../providers';
import { formNameMessage, formNamePath, formNameProblem } from '../../schemas';
import { askedDims, videoHoldPrice } from '../../billing';

/**
 * Validation of POST /v1/videos. Every rejection is a 400 naming the parameter. The checks
 * that need no I/O run first (validateVideoRequest); images are decoded/fetched afterwards (loadImages), so a
 * request with a bad `seconds` never costs a URL fetch.
 */

export const MAX_PROMPT_CHARS = 10_000;
export const MAX_REFERENCE_IMAGES = 9;
export const RESOLUTIONS = ['480p', '720p', '1080p', '4k'] as const;
export const DEFAULT_RESOLUTION = '720p';
/** The catalog family whose models accept last_frame, reference_images, resolution, watermark, return_last_frame. */
export const REFERENCE_FAMILY = 'seedance';

const REFERENCE_ONLY = ['last_frame', 'reference_images', 'resolution', 'watermark', 'return_last_frame'] as const;

/** Aspect ratios each video protocol accepts. */
const RATIOS: Record<string, string[]> = {
  veo: ['16:9', '9:16'],
  seedance: ['16:9', '4:3', '1:1', '3:4', '9:16', '21:9'],
};
/** Pass-through keys that would contradict a gateway field (or what we bill), per video protocol. */
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
  /** seconds x the highest price per second what was asked can be delivered at: the hold placed at submission. */
  maxCostVnd: number;
  /** That price per second (src/billing/videoPricing.ts). */
  holdPricePerSecond: number;
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
function parseSize(
  size: unknown,
  protocol: string,
  family: string,
): { aspectRatio: string; impliedResolution?: string } {
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
  const ratios = RATIOS[protocol] ?? RATIOS.seedance;
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
      `The size ${clipJson(size)} (aspect ratio ${w / g}:${h / g}) is not supported by this model; ` +
        `supported aspect ratios: ${ratios.join(', ')}.`,
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

/** What the field validators see: the body and the model it names. */
interface FieldContext {
  body: Record<string, unknown>;
  model: ModelConfig;
  /**
   * The video protocol its provider speaks (veo, seedance: src/providers/kinds.ts) and the model's family (the
   * protocol unless the catalog says otherwise).
   */
  protocol: string;
  family: string;
  referenceFamily: boolean;
  /** A multipart body: every value arrives as a string. */
  fromForm: boolean;
}

/** The request as the validators fill it in. */
type Draft = VideoRequest<ImageSource> & { impliedResolution?: string };

/**
 * One entry of the validation table: the body fields it reads, and the check that refuses them (a 400 naming the
 * parameter) or answers what they mean for the request (given what the entries before it answered).
 */
interface FieldValidator {
  fields: readonly string[];
  check(c: FieldContext, r: Readonly<Draft>): Partial<Draft> | void;
}

const given = (v: unknown) => v !== undefined && v !== null;
const givenNonEmpty = (v: unknown) => given(v) && v !== '';

/**
 * The fields of POST /v1/videos, checked in this order (so a request with several bad fields is refused for the
 * first of them). A field in no entry is refused as unknown.
 */
const VALIDATORS: readonly FieldValidator[] = [
  { fields: ['model'], check: () => undefined }, // resolved first, by the catalog
  { fields: ['prompt'], check: (c) => ({ prompt: checkPrompt(c.body.prompt) }) },
  { fields: ['seconds'], check: checkSeconds },
  { fields: REFERENCE_ONLY, check: refuseReferenceOnly },
  { fields: ['seed'], check: checkSeed },
  { fields: ['generate_audio'], check: checkGenerateAudio },
  { fields: ['size'], check: checkSize },
  { fields: ['resolution'], check: checkResolution },
  { fields: ['watermark'], check: (c) => ({ watermark: optionalBoolean(c, 'watermark') }) },
  {
    fields: ['return_last_frame'],
    check: (c) => ({ returnLastFrame: optionalBoolean(c, 'return_last_frame') ?? false }),
  },
  { fields: ['input_reference', 'last_frame', 'reference_images'], check: (c) => ({ images: imageSources(c.body) }) },
  {
    fields: ['parameters'],
    check: (c) => ({ parameters: passThroughParameters(c.body.parameters, c.protocol, c.fromForm) }),
  },
];
const FIELDS = new Set(VALIDATORS.flatMap((v) => v.fields));

/**
 * Checks a create request's fields against the model (no I/O), entry by entry of VALIDATORS. `fromForm` marks a
 * multipart body, whose values all arrive as strings.
 */
export function validateVideoRequest(
  body: Record<string, unknown>,
  catalog: Catalog,
  fromForm = false,
): ValidVideoRequest {
  const model = catalog.require(body.model, 'video');
  // What the provider speaks (Veo on Vertex is Veo): Veo's rules hold wherever Veo runs.
  const protocol = wireOf(catalog.provider(model).kind, model.upstreamModel);
  const family = model.family ?? protocol;
  const c: FieldContext = { body, model, protocol, family, referenceFamily: family === REFERENCE_FAMILY, fromForm };
  for (const k of Object.keys(body)) {
    if (!FIELDS.has(k)) throw bad(k, `Unrecognized request argument supplied: ${clip(k)}`, 'unknown_parameter');
  }
  const r = {} as Draft;
  for (const v of VALIDATORS) Object.assign(r, v.check(c, r));
  const holdPricePerSecond = videoHoldPrice(model.pricing, askedDims(r));
  const maxCostVnd = r.seconds * holdPricePerSecond;
  if (!Number.isSafeInteger(maxCostVnd))
    throw new ApiError(500, 'The model price is misconfigured.', 'server_error', null, 'pricing_error');
  return {
    model,
    maxCostVnd,
    holdPricePerSecond,
    request: {
      prompt: r.prompt,
      seconds: r.seconds,
      size: typeof body.size === 'string' && body.size !== '' ? body.size : undefined,
      aspectRatio: r.aspectRatio,
      resolution: r.resolution,
      seed: r.seed,
      generateAudio: r.generateAudio,
      watermark: r.watermark,
      returnLastFrame: r.returnLastFrame,
      parameters: r.parameters,
      images: r.images,
    },
  };
}

/** `seconds`: one of the model's durations (its default when absent). */
function checkSeconds(c: FieldContext): Pick<Draft, 'seconds'> {
  const allowed = c.model.allowedDurations!;
  if (!givenNonEmpty(c.body.seconds)) return { seconds: c.model.defaultDuration ?? allowed[0] };
  const seconds = integer(c.body.seconds, 'seconds', 'an integer number of seconds');
  if (!allowed.includes(seconds))
    throw bad(
      'seconds',
      `Invalid 'seconds' ${seconds}: the model '${c.model.id}' allows ${allowed.join(', ')} seconds.`,
    );
  return { seconds };
}

/** Fields only the reference-capable family accepts: refused, by name, for every other model. */
function refuseReferenceOnly(c: FieldContext): void {
  if (c.referenceFamily) return;
  const f = REFERENCE_ONLY.find((k) => given(c.body[k]));
  if (f)
    throw bad(
      f,
      `'${f}' is only supported by the reference-capable (${REFERENCE_FAMILY}) video models; ` +
        `the model '${c.model.id}' does not support it.`,
      'unsupported_parameter',
    );
}

/** `seed`: Veo on the Gemini API cannot honour it; say so rather than drop it silently. */
function checkSeed(c: FieldContext): Pick<Draft, 'seed'> | void {
  if (!given(c.body.seed)) return;
  if (c.protocol === 'veo')
    throw bad(
      'seed',
      `The model '${c.model.id}' (Google Veo via the Gemini API) cannot honour 'seed'; remove it.`,
      'unsupported_parameter',
    );
  const seed = integer(c.body.seed, 'seed', 'an integer');
  if (seed < -1 || seed > 2147483647) throw bad('seed', "Invalid 'seed': must be between -1 and 2147483647.");
  return { seed };
}

/** `generate_audio`: Veo always generates audio, the reference family has a switch (on by default), others none. */
function checkGenerateAudio(c: FieldContext): Pick<Draft, 'generateAudio'> | void {
  if (!given(c.body.generate_audio)) return c.referenceFamily ? { generateAudio: true } : undefined;
  const on = boolean(c.body.generate_audio, 'generate_audio', c.fromForm);
  if (c.protocol === 'veo') {
    // Honoured by default: nothing to send.
    if (!on)
      throw bad(
        'generate_audio',
        `The model '${c.model.id}' (Google Veo) always generates audio; generate_audio=false cannot be honoured.`,
        'unsupported_parameter',
      );
    return;
  }
  if (!c.referenceFamily)
    throw bad(
      'generate_audio',
      `The model '${c.model.id}' has no audio switch; 'generate_audio' cannot be honoured.`,
      'unsupported_parameter',
    );
  return { generateAudio: on };
}

/** `size`: the aspect ratio, and for `WxH` the resolution it implies. */
function checkSize(c: FieldContext): Pick<Draft, 'aspectRatio' | 'impliedResolution'> | void {
  if (givenNonEmpty(c.body.size)) return parseSize(c.body.size, c.protocol, c.family);
}

/**
 * `resolution` (the reference family only): given, or implied by the size, or the default; it must agree with
 * the size. Other models take the size's resolution, and Veo renders 1080p and 4k only as 8-second clips.
 */
function checkResolution(c: FieldContext, r: Readonly<Draft>): Pick<Draft, 'resolution'> {
  const { body } = c;
  const implied = r.impliedResolution;
  if (!c.referenceFamily) {
    if (c.protocol === 'veo' && implied && implied !== '720p' && r.seconds !== 8)
      throw bad(
        'seconds',
        `Veo renders ${implied} (size ${clipJson(body.size)}) only as 8-second videos; ` +
          'set seconds to 8 or use a 720p size.',
      );
    return { resolution: implied };
  }
  if (!given(body.resolution)) return { resolution: implied ?? DEFAULT_RESOLUTION };
  if (typeof body.resolution !== 'string' || !(RESOLUTIONS as readonly string[]).includes(body.resolution))
    throw bad('resolution', `Invalid 'resolution' ${clipJson(body.resolution)}: use one of ${RESOLUTIONS.join(', ')}.`);
  if (implied && implied !== body.resolution)
    throw bad(
      'size',
      `The size ${clipJson(body.size)} implies ${implied} but 'resolution' is ${body.resolution}; ` +
        'give a matching size or a ratio such as "16:9".',
    );
  return { resolution: body.resolution };
}

/** An optional boolean field (absent or null: undefined). */
function optionalBoolean(c: FieldContext, param: string): boolean | undefined {
  return given(c.body[param]) ? boolean(c.body[param], param, c.fromForm) : undefined;
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

/**
 * The image inputs as given (decoded later by loadImages): a first frame, a last frame after it, or reference
 * images.
 */
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
  protocol: string,
  fromForm: boolean,
): Record<string, unknown> | undefined {
  if (parameters === undefined || parameters === null) return undefined;
  if (!isObject(parameters)) throw bad('parameters', "Invalid 'parameters': expected an object.", 'invalid_type');
  const unstorable = findUnstorableText(parameters, 'parameters');
  if (unstorable) throw bad(unstorable, unstorableTextMessage(unstorable));
  const reserved = RESERVED_PARAMETERS[protocol] ?? {};
  for (const k of Object.keys(parameters)) {
    if (k in reserved) {
      const field = reserved[k];
      const unhonoured = protocol === 'veo' && (k === 'seed' || k === 'generateAudio');
      const note = unhonoured ? ' (which Veo on the Gemini API cannot honour)' : '';
      throw bad(
        `parameters.${k}`,
        field
          ? `'parameters.${k}' cannot be passed through: set the gateway field '${field}' instead${note}.`
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
