import fsp from 'node:fs/promises';
import { badRequest } from '../api/errors';
import type { ImageLoader, ImageSource, LoadedImage } from './validate';

/**
 * Turns a validated image source into bytes: PNG, JPEG or WebP by magic bytes, at most 10 MB.
 * Interim implementation for data URIs, {bytesBase64Encoded, mimeType} and uploaded files; URL fetching (with SSRF
 * protection) is delegated to `fetchUrl` (src/video/fetchImage.ts once it lands).
 */

export const MAX_IMAGE_BYTES = 10 * 1024 * 1024;

export function sniffImage(b: Buffer): string | null {
  if (b.length >= 8 && b.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))) return 'image/png';
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return 'image/jpeg';
  if (b.length >= 12 && b.toString('latin1', 0, 4) === 'RIFF' && b.toString('latin1', 8, 12) === 'WEBP') return 'image/webp';
  return null;
}

function checked(bytes: Buffer, param: string): LoadedImage {
  if (bytes.length === 0) throw badRequest(`Invalid '${param}': the image is empty.`, param);
  if (bytes.length > MAX_IMAGE_BYTES) throw badRequest(`Invalid '${param}': the image is ${bytes.length} bytes; at most 10 MB (${MAX_IMAGE_BYTES} bytes) allowed.`, param, 'image_too_large');
  const mimeType = sniffImage(bytes);
  if (!mimeType) throw badRequest(`Invalid '${param}': not a PNG, JPEG or WebP image.`, param, 'invalid_image_format');
  return { bytes, mimeType };
}

function base64(data: string, param: string): Buffer {
  const clean = data.replace(/\s+/g, '');
  // Reject early: base64 of 10 MB is ~13.4 M characters.
  if (clean.length > Math.ceil(MAX_IMAGE_BYTES / 3) * 4 + 4) throw badRequest(`Invalid '${param}': the image is larger than 10 MB.`, param, 'image_too_large');
  if (!/^[A-Za-z0-9+/_-]*={0,2}$/.test(clean)) throw badRequest(`Invalid '${param}': the base64 data is malformed.`, param, 'invalid_base64');
  return Buffer.from(clean, 'base64');
}

export type UrlFetcher = (url: string, param: string) => Promise<LoadedImage>;

export function createImageLoader(fetchUrl: UrlFetcher): ImageLoader {
  return async (src: ImageSource, param: string): Promise<LoadedImage> => {
    if (src.kind === 'object') return checked(base64(src.bytesBase64Encoded, param), param);
    if (src.kind === 'file') {
      if (src.size > MAX_IMAGE_BYTES) throw badRequest(`Invalid '${param}': the image is ${src.size} bytes; at most 10 MB allowed.`, param, 'image_too_large');
      return checked(await fsp.readFile(src.path), param);
    }
    const v = src.value;
    if (/^data:/i.test(v)) {
      const m = /^data:([\w.+-]+\/[\w.+-]+)?((?:;[\w-]+=[^;,]*)*);base64,(.*)$/is.exec(v);
      if (!m) throw badRequest(`Invalid '${param}': a data URI must look like data:<mime>;base64,<data>.`, param, 'invalid_data_uri');
      return checked(base64(m[3], param), param);
    }
    if (/^https?:\/\//i.test(v)) return fetchUrl(v, param);
    throw badRequest(`Invalid '${param}': expected a data URI (data:<mime>;base64,...), an http(s) URL, or {bytesBase64Encoded, mimeType}.`, param);
  };
}

/** Until SSRF-safe URL fetching (src/video/fetchImage.ts) is wired in, URL images are refused clearly. */
export const urlImagesUnavailable: UrlFetcher = async (_url, param) => {
  throw badRequest(`Invalid '${param}': image URLs are not accepted yet; send a data URI or {bytesBase64Encoded, mimeType}.`, param, 'unsupported_image_url');
};
