import type { IncomingMessage } from 'node:http';
import { pipeline, type Readable } from 'node:stream';
import zlib from 'node:zlib';
import getRawBody from 'raw-body';
import type Koa from 'koa';
import { ApiError } from '../../errors';
import { jsonBodyProblem, MAX_BODY_DEPTH } from '../../schemas';
import type { Ctx, GatewayState } from '../requestState';
import { clipJson } from '../../text';

/**
 * The JSON request body of the API routes, read with raw-body (inflated first per its Content-Encoding), decoded as
 * strict UTF-8 and parsed with JSON.parse.
 *
 * Not koa-body (co-body underneath): it adds three content-type checks, a decompression probe and a second scan of
 * the text for prototype keys on the gateway's hottest path, and it decodes invalid UTF-8 as U+FFFD, silently
 * storing text the client never sent.
 */

/** Whether a Content-Type is JSON (application/json or any +json type), parameters ignored. */
export function isJsonType(contentType: string): boolean {
  if (contentType === 'application/json') return true;
  const semi = contentType.indexOf(';');
  const type = (semi < 0 ? contentType : contentType.slice(0, semi)).trim().toLowerCase();
  return type === 'application/json' || (type.startsWith('application/') && type.endsWith('+json'));
}

// JSON text is UTF-8 (RFC 8259 8.1): a byte sequence that is not is refused, never replaced. A BOM is kept, so it
// fails JSON.parse as before.
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** The body inflated per its Content-Encoding (`gzip`, `deflate`, `br`; codings are case-insensitive). */
function inflated(req: IncomingMessage, encoding: string): Readable {
  const coding = encoding.trim().toLowerCase();
  const z =
    coding === 'gzip' || coding === 'x-gzip' || coding === 'deflate'
      ? zlib.createUnzip()
      : coding === 'br'
        ? zlib.createBrotliDecompress()
        : null;
  if (!z)
    throw new ApiError(
      415,
      `Unsupported Content-Encoding ${clipJson(encoding)}; send gzip, deflate, br or none.`,
      'invalid_request_error',
      null,
      'unsupported_content_encoding',
    );
  // pipeline: a request that ends early (the client gone) fails the inflater too, so the read below ends.
  pipeline(req, z, () => undefined);
  return z;
}

// A webhook signed over its exact bytes (SePay's HMAC) needs the text as sent, not the parsed body re-serialized.
const bodyTexts = new WeakMap<IncomingMessage, string>();

/** The body's text as received (inflated), for a route whose jsonBody was asked to keep it. */
export const receivedJsonText = (req: IncomingMessage): string | undefined => bodyTexts.get(req);

/**
 * Reads and parses a JSON body of at most `limitBytes` once inflated (413 beyond, 400 if malformed or not UTF-8).
 * `encoding`: its Content-Encoding (none: identity).
 */
export async function readJson(
  req: IncomingMessage,
  limitBytes: number,
  encoding = '',
  keepText = false,
): Promise<unknown> {
  const len = req.headers['content-length'];
  const plain = encoding === '' || encoding.trim().toLowerCase() === 'identity';
  const buf = plain
    ? await getRawBody(req, { limit: limitBytes, length: len === undefined ? undefined : Number(len) })
    : await getRawBody(inflated(req, encoding), { limit: limitBytes });
  if (keepText) bodyTexts.set(req, '');
  if (buf.length === 0) return {}; // as co-body in strict mode: an empty body is an empty object
  let text: string;
  try {
    text = utf8.decode(buf);
  } catch {
    throw new ApiError(
      400,
      'The request body is not valid UTF-8. JSON must be sent as UTF-8; escape other text as \\uXXXX.',
      'invalid_request_error',
      null,
      'invalid_encoding',
    );
  }
  if (keepText) bodyTexts.set(req, text);
  try {
    return JSON.parse(text);
  } catch {
    throw new ApiError(
      400,
      'We could not parse the JSON body of your request. Send valid JSON with Content-Type: application/json.',
      'invalid_request_error',
      null,
      'invalid_json',
    );
  }
}

/** No real request nests deeper; recursive code downstream (validation, hashing, translation) must never see more. */
const MAX_JSON_DEPTH = MAX_BODY_DEPTH;

export { jsonBodyProblem };

/**
 * JSON body: 415 unless Content-Type is JSON, 413 over the limit, 400 on malformed JSON, a non-object body, a body
 * nested too deep or one carrying prototype keys, or one that is not UTF-8. Read (inflated if compressed) by readJson.
 */
export function jsonBodyReader(limitBytes: number, keepText = false): (ctx: Ctx) => Promise<void> {
  return async (ctx) => {
    const contentType = ctx.get('content-type');
    if (!isJsonType(contentType)) {
      throw new ApiError(
        415,
        `Unsupported Content-Type ${clipJson(contentType)}; send application/json.`,
        'invalid_request_error',
        null,
        'unsupported_media_type',
      );
    }
    try {
      (ctx.request as { body?: unknown }).body = await readJson(
        ctx.req,
        limitBytes,
        ctx.get('content-encoding'),
        keepText,
      );
    } catch (e: any) {
      if (e instanceof ApiError) throw e;
      // A Content-Encoding the body does not match (e.g. gzip header, plain body) fails in zlib, without a status.
      // zlib says Z_DATA_ERROR and the like; brotli ERR__ERROR_FORMAT_... (its code: ERR_BROTLI_...).
      if (/\bZ_[A-Z_]+\b|ERR__ERROR_FORMAT|BROTLI/.test(`${e?.code ?? ''} ${e?.message ?? ''}`))
        throw new ApiError(
          400,
          'The request body could not be decoded with its Content-Encoding.',
          'invalid_request_error',
          null,
          'invalid_body_encoding',
        );
      // The client went away before its body was read (raw-body: "stream is not readable" / "request aborted"; an
      // inflated body: "Premature close"): the client's doing, not a 500 with a stack trace in the logs.
      if (/stream is not readable|request aborted|Premature close/.test(`${e?.message ?? ''}`)) {
        throw new ApiError(
          400,
          'The request body could not be read: the client closed the connection.',
          'invalid_request_error',
          null,
          'request_aborted',
        );
      }
      throw e;
    }
    const body = ctx.request.body;
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
      throw new ApiError(400, 'The request body must be a JSON object.', 'invalid_request_error', null, 'invalid_json');
    }
    const problem = jsonBodyProblem(body, MAX_JSON_DEPTH);
    if (problem === 'too_deep') {
      throw new ApiError(
        400,
        `The JSON body is nested more than ${MAX_JSON_DEPTH} levels deep.`,
        'invalid_request_error',
        null,
        'invalid_json',
      );
    }
    if (problem === 'prototype_key') {
      throw new ApiError(
        400,
        'The JSON body contains a forbidden key ("__proto__", or "constructor" with a "prototype").',
        'invalid_request_error',
        null,
        'invalid_json',
      );
    }
  };
}

/** `keepText`: the text as received stays readable with receivedJsonText (for a signature over the bytes). */
export function jsonBody(limitBytes: number, keepText = false): Koa.Middleware<GatewayState> {
  const read = jsonBodyReader(limitBytes, keepText);
  return async (ctx, next) => {
    await read(ctx);
    await next();
  };
}
