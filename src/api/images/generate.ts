import type { AppDeps } from '../deps';
import type { Ctx } from '../middleware';
import { ApiError } from '../../errors';
import type { ModelConfig } from '../../catalog/catalog';
import type { ImageEditFields, ImageGenerationBody } from '../../schemas/images';
import { imagesCost } from '../../billing/pricing';
import type { Meter } from '../../billing/meter';
import type { BufferedResponse, MultipartValue } from '../../providers/types';
import { boundOverCandidates } from '../../routing/bound';
import { callRouted, clientAbortSignal, RoutedPayload, sendJsonBuffer } from '../upstream';
import type { UploadedFile } from '../uploads';
import { reserve } from '../reserve';
import { setCostHeaders } from '../costReport';

/**
 * POST /v1/images/generations (JSON, spec 4.7) and POST /v1/images/edits (multipart, spec 4.8): n images reserved
 * at the most expensive model that may answer, the images the upstream returned billed, its body answered as received
 * (the OpenAI shape {"created","data":[{"b64_json"|"url"}]}).
 */

/** n images at the most expensive model that may answer (retries and fallbacks included). */
function imagesBound(deps: AppDeps, model: ModelConfig, n: number): number {
  return boundOverCandidates(deps.catalog, deps.router, model, (m) => ({ maxCost: imagesCost(m.pricing, n) })).maxCost;
}

export async function generateImages(
  ctx: Ctx,
  deps: AppDeps,
  model: ModelConfig,
  body: ImageGenerationBody,
): Promise<void> {
  body.model = model.upstreamModel;
  const payloads = new RoutedPayload(body);
  const meter = await reserve(ctx, deps, model.id, 'images.generations', imagesBound(deps, model, body.n ?? 1));
  const signal = clientAbortSignal(ctx.res);
  const answer = await callRouted(ctx, deps.router, model, meter, {}, (t) =>
    deps.providers.openaiFor(t.deployment).postJson('/images/generations', payloads.for(t), { signal }),
  );
  if (answer) settleImages(ctx, meter, answer.model, answer.value);
}

/** `image` and `mask` are PNGs already checked by the router. */
export async function editImages(
  ctx: Ctx,
  deps: AppDeps,
  model: ModelConfig,
  fields: ImageEditFields,
  image: UploadedFile,
  mask: UploadedFile | null,
): Promise<void> {
  const up: Record<string, MultipartValue> = {
    model: model.upstreamModel,
    prompt: fields.prompt,
    image: { path: image.filepath, filename: image.originalFilename || 'image.png', contentType: 'image/png' },
  };
  if (mask) up.mask = { path: mask.filepath, filename: mask.originalFilename || 'mask.png', contentType: 'image/png' };
  for (const k of ['n', 'size', 'quality', 'response_format', 'background', 'user'] as const) {
    if (fields[k] !== undefined) up[k] = String(fields[k]);
  }
  const meter = await reserve(ctx, deps, model.id, 'images.edits', imagesBound(deps, model, fields.n ?? 1));
  const signal = clientAbortSignal(ctx.res);
  const answer = await callRouted(ctx, deps.router, model, meter, {}, (t) => {
    up.model = t.deployment.upstreamModel; // the files are read again from disk for each try
    return deps.providers.openaiFor(t.deployment).postMultipart('/images/edits', up, { signal });
  });
  if (answer) settleImages(ctx, meter, answer.model, answer.value);
}

/** Bills the images the upstream actually returned, at the answering model's price, and answers with its body as received. */
function settleImages(ctx: Ctx, meter: Meter, answered: ModelConfig, res: BufferedResponse): void {
  let count: number;
  try {
    const parsed = JSON.parse(res.body.toString('utf8')) as { data?: unknown };
    if (!Array.isArray(parsed.data)) throw new Error('no data');
    count = parsed.data.length;
  } catch {
    meter.cancel({}, 502);
    throw new ApiError(
      502,
      'The upstream provider returned an invalid images response.',
      'upstream_error',
      null,
      'upstream_error',
    );
  }
  meter.settle(imagesCost(answered.pricing, count), { images: count }, answered.pricing);
  setCostHeaders(ctx.res, meter);
  sendJsonBuffer(ctx, res.body);
}
