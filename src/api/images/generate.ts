import { callerOf } from '../httpCaller';
import type { AppDeps } from '../../operations';
import type { Ctx } from '../middleware';
import { ApiError } from '../../errors';
import type { ModelConfig } from '../../catalog';
import type { ImageEditFields, ImageGenerationBody } from '../../schemas';
import { imagesCost } from '../../billing';
import type { BufferedResponse, MultipartValue } from '../../providers';
import { boundOverCandidates, openCall, RoutedPayload, type RoutedCall } from '../../modelCall';
import { sendJsonBuffer } from '../jsonBuffer';
import type { UploadedFile } from '../uploads';

/**
 * POST /v1/images/generations (JSON) and POST /v1/images/edits (multipart): n images reserved
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
  const call = await openCall(callerOf(ctx, deps), deps, model, 'images.generations', {
    maxCost: imagesBound(deps, model, body.n ?? 1),
  });
  const res = await call.run((t) =>
    deps.providers.openaiFor(t.deployment).postJson('/images/generations', payloads.for(t), call.tryOptions),
  );
  settleImages(ctx, call, res);
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
  const call = await openCall(callerOf(ctx, deps), deps, model, 'images.edits', {
    maxCost: imagesBound(deps, model, fields.n ?? 1),
  });
  const res = await call.run((t) => {
    up.model = t.deployment.upstreamModel; // the files are read again from disk for each try
    return deps.providers.openaiFor(t.deployment).postMultipart('/images/edits', up, call.tryOptions);
  });
  settleImages(ctx, call, res);
}

/**
 * Bills the images the upstream actually returned, at the answering model's price, and answers with its body as
 * received.
 */
function settleImages(ctx: Ctx, call: RoutedCall, res: BufferedResponse): void {
  let count: number;
  try {
    const parsed = JSON.parse(res.body.toString('utf8')) as { data?: unknown };
    if (!Array.isArray(parsed.data)) throw new Error('no data');
    count = parsed.data.length;
  } catch {
    call.cancel(502);
    throw new ApiError(
      502,
      'The upstream provider returned an invalid images response.',
      'upstream_error',
      null,
      'upstream_error',
    );
  }
  call.settleCost(imagesCost(call.answered.pricing, count), { images: count });
  call.setCostHeaders();
  sendJsonBuffer(ctx, res.body);
}
