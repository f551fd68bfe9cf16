import Router from '@koa/router';
import type { AppDeps } from '../../operations';
import { jsonBody, multipartBody, requireApiKey, route, type GatewayState } from '../middleware';
import { badRequest } from '../../errors';
import { validateImageEditFields, validateImageGeneration } from '../../schemas';
import { isPngHead, readHead, removeUploads, uploadedFile } from '../uploads';
import { editImages, generateImages } from '../images';

/** Input images: PNG only, at most 10 MB each (docs/api.md, uploads). */
const MAX_IMAGE_BYTES = 10 * 1024 * 1024;

/**
 * POST /v1/images/generations (JSON) and POST /v1/images/edits (multipart; the PNG image and optional PNG mask
 * checked by magic bytes): validate, find the model, then src/api/images/generate.ts bills, calls and answers.
 */
export function imagesRouter(deps: AppDeps): Router<GatewayState> {
  const r = new Router<GatewayState>();
  const auth = requireApiKey(deps);

  r.post(
    '/v1/images/generations',
    route('/v1/images/generations'),
    auth,
    jsonBody(deps.config.maxJsonBytes),
    async (ctx) => {
      const body = ctx.request.body;
      validateImageGeneration(body);
      const model = deps.catalog.require(body.model, 'image');
      ctx.state.model = model.id;
      await generateImages(ctx, deps, model, body);
    },
  );

  r.post('/v1/images/edits', route('/v1/images/edits'), auth, multipartBody(MAX_IMAGE_BYTES), async (ctx) => {
    try {
      const fields = (ctx.request.body ?? {}) as Record<string, unknown>;
      validateImageEditFields(fields);
      const image = uploadedFile(ctx, 'image', 'image[]');
      if (!image) throw badRequest("Missing required parameter: 'image'.", 'image', 'missing_required_parameter');
      const model = deps.catalog.require(fields.model, 'image');
      ctx.state.model = model.id;
      if (!isPngHead(await readHead(image.filepath)))
        throw badRequest('Invalid image: the image must be a PNG file.', 'image', 'invalid_image_format');
      const mask = uploadedFile(ctx, 'mask');
      if (mask && !isPngHead(await readHead(mask.filepath)))
        throw badRequest('Invalid mask: the mask must be a PNG file.', 'mask', 'invalid_image_format');
      await editImages(ctx, deps, model, fields, image, mask);
    } finally {
      await removeUploads(ctx);
    }
  });
  return r;
}
