import Router from '@koa/router';
import type { AppDeps } from '../deps';
import { jsonBody, multipartBody, requireApiKey, route, type Ctx, type GatewayState } from '../middleware';
import { ApiError, badRequest } from '../../errors';
import { validateImageEditFields, validateImageGeneration } from '../../schemas/images';
import { imagesCost } from '../../billing/pricing';
import type { Meter } from '../../billing/meter';
import type { BufferedResponse, MultipartValue } from '../../providers/types';
import { callRouted, clientAbortSignal, RoutedPayload, sendJsonBuffer } from '../upstream';
import { boundOverCandidates } from '../../routing/bound';
import type { ModelConfig } from '../../catalog/catalog';
import { isPngHead, readHead, removeUploads, uploadedFile } from '../uploads';
import { reserve } from '../reserve';
import { setCostHeaders } from '../costReport';

/** Input images: PNG only (spec 4.8), at most 10 MB each (design: input image limit). */
const MAX_IMAGE_BYTES = 10 * 1024 * 1024;

/** Bills the images the upstream actually returned and answers with its body as received. */
function settleImages(ctx: Ctx, meter: Meter, perImage: (n: number) => number, res: BufferedResponse): void {
  let count: number;
  try {
    const parsed = JSON.parse(res.body.toString('utf8')) as { data?: unknown };
    if (!Array.isArray(parsed.data)) throw new Error('no data');
    count = parsed.data.length;
  } catch {
    meter.cancel({}, 502);
    throw new ApiError(502, 'The upstream provider returned an invalid images response.', 'upstream_error', null, 'upstream_error');
  }
  meter.settle(perImage(count), { images: count });
  setCostHeaders(ctx.res, meter);
  sendJsonBuffer(ctx, res.body);
}

/**
 * POST /v1/images/generations (JSON, spec 4.7) and POST /v1/images/edits (multipart, spec 4.8; PNG image and
 * optional PNG mask checked by magic bytes). Response: the OpenAI shape {"created","data":[{"b64_json"|"url"}]}.
 * Billed per returned image; the reservation is n images.
 */
export function imagesRouter(deps: AppDeps): Router<GatewayState> {
  const r = new Router<GatewayState>();
  const auth = requireApiKey(deps);
  /** n images at the most expensive model that may answer (retries and fallbacks included). */
  const imagesBound = (model: ModelConfig, n: number) => boundOverCandidates(deps.catalog, deps.router, model, (m) => ({ maxCost: imagesCost(m.pricing, n) })).maxCost;

  r.post('/v1/images/generations', route('/v1/images/generations'), auth, jsonBody(deps.config.maxJsonBytes), async (ctx) => {
    const body = ctx.request.body;
    validateImageGeneration(body);
    const model = deps.catalog.require(body.model, 'image');
    ctx.state.model = model.id;
    body.model = model.upstreamModel;
    const payloads = new RoutedPayload(body);
    const meter = await reserve(ctx, deps, model.id, 'images.generations', imagesBound(model, body.n ?? 1));
    const signal = clientAbortSignal(ctx.res);
    const answer = await callRouted(ctx, deps.router, model, meter, {}, (t) => deps.providers.openaiFor(t.deployment).postJson('/images/generations', payloads.for(t), { signal }));
    if (answer) settleImages(ctx, meter, (n) => imagesCost(answer.model.pricing, n), answer.value);
  });

  r.post('/v1/images/edits', route('/v1/images/edits'), auth, multipartBody(MAX_IMAGE_BYTES), async (ctx) => {
    try {
      await edit(ctx);
    } finally {
      await removeUploads(ctx);
    }
  });

  async function edit(ctx: Ctx): Promise<void> {
    const fields = (ctx.request.body ?? {}) as Record<string, unknown>;
    validateImageEditFields(fields);
    const image = uploadedFile(ctx, 'image', 'image[]');
    if (!image) throw badRequest("Missing required parameter: 'image'.", 'image', 'missing_required_parameter');
    const model = deps.catalog.require(fields.model, 'image');
    ctx.state.model = model.id;
    if (!isPngHead(await readHead(image.filepath))) throw badRequest('Invalid image: the image must be a PNG file.', 'image', 'invalid_image_format');
    const mask = uploadedFile(ctx, 'mask');
    if (mask && !isPngHead(await readHead(mask.filepath))) throw badRequest('Invalid mask: the mask must be a PNG file.', 'mask', 'invalid_image_format');
    const up: Record<string, MultipartValue> = {
      model: model.upstreamModel,
      prompt: fields.prompt,
      image: { path: image.filepath, filename: image.originalFilename || 'image.png', contentType: 'image/png' },
    };
    if (mask) up.mask = { path: mask.filepath, filename: mask.originalFilename || 'mask.png', contentType: 'image/png' };
    for (const k of ['n', 'size', 'quality', 'response_format', 'background', 'user'] as const) {
      if (fields[k] !== undefined) up[k] = String(fields[k]);
    }
    const meter = await reserve(ctx, deps, model.id, 'images.edits', imagesBound(model, fields.n ?? 1));
    const signal = clientAbortSignal(ctx.res);
    const answer = await callRouted(ctx, deps.router, model, meter, {}, (t) => {
      up.model = t.deployment.upstreamModel; // the files are read again from disk for each try
      return deps.providers.openaiFor(t.deployment).postMultipart('/images/edits', up, { signal });
    });
    if (answer) settleImages(ctx, meter, (n) => imagesCost(answer.model.pricing, n), answer.value);
  }
  return r;
}
