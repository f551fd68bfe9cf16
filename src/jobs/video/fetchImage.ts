import type { LookupAddress } from 'node:dns';
import net from 'node:net';
import { request, errors as undiciErrors } from 'undici';
import { ApiError, badRequest } from '../../errors';
import { clip } from '../../text';
import { bareHost, NonPublicHost, pinnedAgent, vetHost as vetAddresses } from '../../net';

/**
 * Resolves an image input of a video job (data URI, {bytesBase64Encoded, mimeType}, or http(s) URL) to bytes,
 * checking the format by magic bytes and the size. URL fetching is SSRF-safe: the host's addresses are resolved
 * here and must all be public (unless the host is on the development allowlist); the connection is pinned to the
 * vetted address so a second DNS answer (rebinding) cannot redirect it; redirects are followed by hand, each hop
 * checked the same way; the body is read only up to the size limit.
 */

export type ImageMime = 'image/png' | 'image/jpeg' | 'image/webp';
export interface ResolvedImage {
  bytes: Buffer;
  mimeType: ImageMime;
}
export interface ResolveImageOptions {
  /** Hosts (`name` or `name:port`) fetched even when they resolve to non-public addresses (local development). */
  allowHosts: string[];
  /** Decoded size limit; default 10 MB. */
  maxBytes?: number;
  /** Whole-fetch limit across redirects, ms (default 30 s); connect and header waits are capped below it. */
  timeoutMs?: number;
  /** Redirects followed at most (default 3). */
  maxRedirects?: number;
  /** DNS resolution; replaceable so tests can simulate a hostname that resolves to a private address. */
  lookup?: (hostname: string) => Promise<LookupAddress[]>;
}

export const MAX_IMAGE_BYTES = 10 * 1024 * 1024;
const DEFAULT_TIMEOUT_MS = 30_000;
const CONNECT_TIMEOUT_MS = 10_000;
const DEFAULT_MAX_REDIRECTS = 3;
const MAX_URL_LENGTH = 8192;

const PNG = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** PNG, JPEG or WebP by magic bytes; null for anything else. */
export function detectImageType(buf: Buffer): ImageMime | null {
  if (buf.length >= 8 && buf.subarray(0, 8).equals(PNG)) return 'image/png';
  if (buf.length >= 3 && buf[0] === 0xff && buf[1] === 0xd8 && buf[2] === 0xff) return 'image/jpeg';
  if (buf.length >= 12 && buf.toString('latin1', 0, 4) === 'RIFF' && buf.toString('latin1', 8, 12) === 'WEBP')
    return 'image/webp';
  return null;
}

/** Lower-cased type without parameters; '' for "not declared" (absent or the generic octet-stream). */
function declaredType(mime: string | undefined | null): string {
  const t = (mime ?? '').split(';')[0].trim().toLowerCase();
  if (t === 'application/octet-stream' || t === 'binary/octet-stream') return '';
  if (t === 'image/jpg' || t === 'image/pjpeg') return 'image/jpeg';
  return t;
}

const fmtMB = (n: number) => `${Math.round((n / (1024 * 1024)) * 10) / 10} MB`;

function tooLarge(param: string, maxBytes: number): ApiError {
  return badRequest(
    `Invalid '${param}': the image is larger than ${fmtMB(maxBytes)} (${maxBytes} bytes).`,
    param,
    'image_too_large',
  );
}

/**
 * Checks decoded bytes: non-empty, within the limit, PNG/JPEG/WebP by magic bytes, and not contradicting a
 * declared MIME type. Also usable for multipart uploads.
 */
export function validateImageBytes(
  bytes: Buffer,
  declaredMime: string | undefined | null,
  param: string,
  maxBytes = MAX_IMAGE_BYTES,
): ResolvedImage {
  if (bytes.length === 0) throw badRequest(`Invalid '${param}': the image is empty.`, param, 'invalid_image');
  if (bytes.length > maxBytes) throw tooLarge(param, maxBytes);
  const mimeType = detectImageType(bytes);
  if (!mimeType) throw badRequest(`Invalid '${param}': not a PNG, JPEG or WebP image.`, param, 'invalid_image_format');
  const declared = declaredType(declaredMime);
  if (declared && declared !== mimeType) {
    throw badRequest(
      `Invalid '${param}': declared as ${clip(declared)} but the data is ${mimeType}.`,
      param,
      'image_type_mismatch',
    );
  }
  return { bytes, mimeType };
}

/** Strict base64 (standard or URL-safe alphabet; whitespace tolerated), refusing oversize input before decoding. */
export function decodeBase64(data: string, param: string, maxBytes = MAX_IMAGE_BYTES): Buffer {
  // Cheap bound first: base64 needs 4 characters per 3 bytes, so anything far longer cannot fit.
  if (data.length > (Math.ceil(maxBytes / 3) * 4 + 4) * 1.1 + 1024) throw tooLarge(param, maxBytes);
  const clean = /\s/.test(data) ? data.replace(/\s+/g, '') : data;
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(clean) && !/^[A-Za-z0-9_-]*={0,2}$/.test(clean)) {
    throw badRequest(`Invalid '${param}': the base64 data is malformed.`, param, 'invalid_base64');
  }
  const unpadded = clean.replace(/=+$/, '');
  if (unpadded.length % 4 === 1 || (clean.length !== unpadded.length && clean.length % 4 !== 0)) {
    throw badRequest(`Invalid '${param}': the base64 data is malformed.`, param, 'invalid_base64');
  }
  if (Math.floor((unpadded.length * 3) / 4) > maxBytes) throw tooLarge(param, maxBytes);
  return Buffer.from(clean, 'base64');
}

const DATA_URI = /^data:([^,;]*)((?:;[^,;]*)*),/i;

function parseDataUri(uri: string, param: string, maxBytes: number): ResolvedImage {
  const m = DATA_URI.exec(uri.slice(0, 512));
  if (!m)
    throw badRequest(
      `Invalid '${param}': a data URI must look like data:<mime>;base64,<data>.`,
      param,
      'invalid_data_uri',
    );
  const params = m[2]
    .split(';')
    .filter(Boolean)
    .map((p) => p.trim().toLowerCase());
  if (!params.includes('base64')) {
    throw badRequest(
      `Invalid '${param}': only base64 data URIs are accepted (data:<mime>;base64,<data>).`,
      param,
      'invalid_data_uri',
    );
  }
  return validateImageBytes(decodeBase64(uri.slice(m[0].length), param, maxBytes), m[1], param, maxBytes);
}

/**
 * Resolves `input` (a data URI, an http(s) URL, or {bytesBase64Encoded, mimeType}) to validated image bytes.
 * Every rejection is an ApiError 400 whose param is `param`.
 */
export async function resolveImage(input: unknown, param: string, opts: ResolveImageOptions): Promise<ResolvedImage> {
  const maxBytes = opts.maxBytes ?? MAX_IMAGE_BYTES;
  if (typeof input === 'string') {
    const v = input.trim();
    if (/^data:/i.test(v)) return parseDataUri(v, param, maxBytes);
    if (/^https?:\/\//i.test(v)) return fetchImageUrl(v, param, opts);
    throw badRequest(
      `Invalid '${param}': expected a data URI (data:<mime>;base64,...), an http(s) URL, ` +
        'or {bytesBase64Encoded, mimeType}.',
      param,
    );
  }
  if (input && typeof input === 'object' && !Array.isArray(input)) {
    const o = input as Record<string, unknown>;
    if (typeof o.bytesBase64Encoded !== 'string' || o.bytesBase64Encoded === '') {
      throw badRequest(`Invalid '${param}': 'bytesBase64Encoded' must be a non-empty base64 string.`, param);
    }
    if (o.mimeType !== undefined && typeof o.mimeType !== 'string') {
      throw badRequest(`Invalid '${param}': 'mimeType' must be a string such as image/png.`, param);
    }
    return validateImageBytes(
      decodeBase64(o.bytesBase64Encoded, param, maxBytes),
      o.mimeType as string | undefined,
      param,
      maxBytes,
    );
  }
  throw badRequest(
    `Invalid '${param}': expected a data URI, an http(s) URL, or {bytesBase64Encoded, mimeType}.`,
    param,
  );
}

// ---------------------------------------------------------------------------------------------------------------
// URL fetching

const defaultPort = (u: URL) => (u.port ? Number(u.port) : u.protocol === 'https:' ? 443 : 80);

/** Parses allowlist entries (`host` or `host:port`, IPv6 as `[::1]:port` or bare), normalised the way URLs are. */
export function parseAllowHosts(entries: string[]): Array<{ host: string; port: number | null }> {
  const out: Array<{ host: string; port: number | null }> = [];
  for (const raw of entries) {
    const e = raw.trim();
    if (!e) continue;
    const m = net.isIPv6(e)
      ? [e, e, undefined]
      : (/^\[([^\]]+)\](?::(\d+))?$/.exec(e) ?? /^([^:[\]]+)(?::(\d+))?$/.exec(e));
    if (!m) continue;
    const [, host, port] = m;
    try {
      // Normalise as a URL would (case, IPv4 shorthand such as 127.1, IPv6 compression).
      const h = new URL(`http://${net.isIPv6(host!) ? `[${host}]` : host}/`).hostname;
      out.push({ host: bareHost(h), port: port === undefined ? null : Number(port) });
    } catch {
      // Not a valid host name: it can never match a URL, so ignore it.
    }
  }
  return out;
}

function isAllowed(u: URL, allow: Array<{ host: string; port: number | null }>): boolean {
  const host = bareHost(u.hostname);
  const port = defaultPort(u);
  return allow.some((a) => a.host === host && (a.port === null || a.port === port));
}

/** Resolves the URL's host and returns the addresses to connect to, refusing non-public ones unless allowed. */
async function vetHost(
  u: URL,
  param: string,
  allowed: boolean,
  lookup: ((h: string) => Promise<LookupAddress[]>) | undefined,
  signal: AbortSignal,
): Promise<LookupAddress[]> {
  try {
    return await vetAddresses(u, { allowPrivate: allowed, lookup, signal });
  } catch (e) {
    if (e instanceof NonPublicHost) {
      throw badRequest(
        `Invalid '${param}': the URL's host ${clip(e.host)} is not a public address (${e.addressClass}); ` +
          'images are fetched only from public hosts.',
        param,
        'image_url_forbidden',
      );
    }
    const host = bareHost(u.hostname);
    throw badRequest(
      signal.aborted
        ? `Invalid '${param}': resolving the host ${clip(host)} timed out.`
        : `Invalid '${param}': could not resolve the host ${clip(host)}.`,
      param,
      'image_fetch_failed',
    );
  }
}

function parseUrl(raw: string, param: string, base?: URL): URL {
  if (raw.length > MAX_URL_LENGTH)
    throw badRequest(`Invalid '${param}': the URL is too long.`, param, 'invalid_image_url');
  let u: URL;
  try {
    u = new URL(raw, base);
  } catch {
    throw badRequest(`Invalid '${param}': not a valid URL.`, param, 'invalid_image_url');
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') {
    throw badRequest(
      `Invalid '${param}': only http and https URLs are fetched${base ? ' (a redirect pointed elsewhere)' : ''}.`,
      param,
      'invalid_image_url',
    );
  }
  if (u.username || u.password)
    throw badRequest(`Invalid '${param}': URLs with credentials are not accepted.`, param, 'invalid_image_url');
  return u;
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);

/** Fetches an image URL under the SSRF rules above. */
export async function fetchImageUrl(rawUrl: string, param: string, opts: ResolveImageOptions): Promise<ResolvedImage> {
  const maxBytes = opts.maxBytes ?? MAX_IMAGE_BYTES;
  const maxRedirects = opts.maxRedirects ?? DEFAULT_MAX_REDIRECTS;
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const allow = parseAllowHosts(opts.allowHosts);
  const lookup = opts.lookup;
  const signal = AbortSignal.timeout(timeoutMs);
  let url = parseUrl(rawUrl, param);

  for (let hop = 0; ; hop++) {
    const pinned = await vetHost(url, param, isAllowed(url, allow), lookup, signal);
    const agent = pinnedAgent(pinned, CONNECT_TIMEOUT_MS);
    try {
      let res: Awaited<ReturnType<typeof request>>;
      try {
        res = await request(url, {
          method: 'GET',
          dispatcher: agent,
          signal,
          headers: {
            accept: 'image/png, image/jpeg, image/webp;q=0.9, */*;q=0.1',
            'accept-encoding': 'identity',
            'user-agent': 'model-gateway-image-fetch',
          },
          headersTimeout: Math.min(timeoutMs, 15_000),
          bodyTimeout: Math.min(timeoutMs, 15_000),
        });
      } catch (e) {
        throw fetchFailed(param, e, signal);
      }
      if (REDIRECTS.has(res.statusCode)) {
        discard(res.body);
        const location = res.headers.location;
        if (typeof location !== 'string' || !location) {
          throw badRequest(
            `Invalid '${param}': the image URL redirected without a Location.`,
            param,
            'image_fetch_failed',
          );
        }
        if (hop >= maxRedirects) {
          throw badRequest(
            `Invalid '${param}': too many redirects (more than ${maxRedirects}).`,
            param,
            'image_fetch_failed',
          );
        }
        url = parseUrl(location, param, url);
        continue;
      }
      if (res.statusCode < 200 || res.statusCode >= 300) {
        discard(res.body);
        throw badRequest(
          `Invalid '${param}': fetching the image URL failed with HTTP ${res.statusCode}.`,
          param,
          'image_fetch_failed',
        );
      }
      const declaredLength = Number(res.headers['content-length']);
      if (Number.isFinite(declaredLength) && declaredLength > maxBytes) {
        discard(res.body);
        throw tooLarge(param, maxBytes);
      }
      const bytes = await readLimited(res.body, maxBytes, param, signal);
      const ct = res.headers['content-type'];
      const declared = declaredType(Array.isArray(ct) ? ct[0] : ct);
      // A server's generic or non-image type says nothing; an image type that contradicts the bytes is refused.
      return validateImageBytes(bytes, declared.startsWith('image/') ? declared : '', param, maxBytes);
    } finally {
      agent.destroy().catch(() => {});
    }
  }
}

/** Drops a response body we will not read (undici reports an abort as an error event: keep it quiet). */
function discard(body: { on(ev: 'error', fn: () => void): unknown; destroy(): unknown }): void {
  body.on('error', () => {});
  body.destroy();
}

async function readLimited(
  body: AsyncIterable<Buffer> & { destroy(): unknown },
  maxBytes: number,
  param: string,
  signal: AbortSignal,
): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let total = 0;
  try {
    for await (const chunk of body) {
      total += chunk.length;
      if (total > maxBytes) {
        body.destroy(); // stop reading: the rest is never downloaded
        throw tooLarge(param, maxBytes);
      }
      chunks.push(chunk);
    }
  } catch (e) {
    if (e instanceof ApiError) throw e;
    throw fetchFailed(param, e, signal);
  }
  return Buffer.concat(chunks, total);
}

function fetchFailed(param: string, e: unknown, signal: AbortSignal): ApiError {
  if (e instanceof ApiError) return e;
  const timedOut =
    signal.aborted ||
    e instanceof undiciErrors.HeadersTimeoutError ||
    e instanceof undiciErrors.BodyTimeoutError ||
    e instanceof undiciErrors.ConnectTimeoutError;
  return badRequest(
    timedOut
      ? `Invalid '${param}': fetching the image URL timed out.`
      : `Invalid '${param}': the image URL could not be fetched.`,
    param,
    'image_fetch_failed',
  );
}
