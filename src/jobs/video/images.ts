import fsp from 'node:fs/promises';
import { badRequest } from '../../errors';
import { MAX_IMAGE_BYTES, resolveImage, validateImageBytes, type ResolveImageOptions } from './fetchImage';
import type { ImageLoader, ImageSource, LoadedImage } from './validate';
import type { Storage } from '../../storage';
import type { StoredImageRef } from './repo';
import type { VideoImages } from '../../providers';

/**
 * The image loader of POST /v1/videos: data URIs, {bytesBase64Encoded, mimeType} and http(s) URLs go through
 * fetchImage.resolveImage (SSRF-safe fetching, magic bytes, 10 MB); multipart uploads are checked the same way.
 */
export function createImageLoader(opts: () => ResolveImageOptions): ImageLoader {
  return async (src: ImageSource, param: string): Promise<LoadedImage> => {
    if (src.kind === 'file') {
      if (src.size > MAX_IMAGE_BYTES)
        throw badRequest(
          `Invalid '${param}': the image is ${src.size} bytes; at most 10 MB (${MAX_IMAGE_BYTES} bytes) allowed.`,
          param,
          'image_too_large',
        );
      return validateImageBytes(await fsp.readFile(src.path), src.mimeType, param);
    }
    if (src.kind === 'object')
      return resolveImage({ bytesBase64Encoded: src.bytesBase64Encoded, mimeType: src.mimeType }, param, opts());
    return resolveImage(src.value, param, opts());
  };
}

/** The file extension of an accepted image type. */
export const imageExtension = (mime: string) =>
  mime === 'image/jpeg' ? 'jpg' : mime === 'image/webp' ? 'webp' : 'png';

/** Removes a job's stored input images (best effort: a file left behind costs storage, never money). */
export async function deleteStoredImages(
  storage: Storage,
  images: VideoImages<StoredImageRef> | undefined,
): Promise<void> {
  const refs = images ? [images.inputReference, images.lastFrame, ...(images.referenceImages ?? [])] : [];
  await Promise.all(refs.map((ref) => (ref ? storage.delete(ref.key).catch(() => undefined) : undefined)));
}
