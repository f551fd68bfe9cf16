import type { IncomingMessage } from 'node:http';
import getRawBody from 'raw-body';
import type Koa from 'koa';
import { ApiError } from '../../errors';
import { lazyKoaBody } from './lazyKoaBody';
import { jsonBodyProblem, MAX_BODY_DEPTH } from '../../schemas/bodyShape';
import type { Ctx, GatewayState } from '../requestState';
import { clipJson } from '../../text/clip';

/**
 * The JSON request body of the API routes, read with raw-body and parsed with JSON.parse.
 *
 * Not koa-body (co-body underneath) for plain bodies: it adds three content-type checks, a decompression probe
 * and a second scan of the text for prototype keys on the gateway's hottest path. Bodies with
 * a Content-Encoding go through koa-body (jsonBodyReader below), which inflates them.
 */

/** Whether a Content-Type is JSON (application/json or any +json type), parameters ignored. */
export function isJsonType(contentType: string): boolean {
  if (contentType === 'application/json') return true;
  const semi = contentType.indexOf(';');
  const type = (semi < 0 ? contentType : contentType.slice(0, semi)).trim().toLowerCase();
  return type === 'application/json' || (type.startsWith('application/') && type.endsWith('+json'));
}

/** Reads and parses an uncompressed JSON body of at most `limitBytes` (413 beyond, 400 if malformed). */
export async function readJson(req: IncomingMessage, limitBytes: number): Promise<unknown> {
  const len = req.headers['content-length'];
  const buf = await getRawBody(req, { limit: limitBytes, length: len === undefined ? undefined : Number(len) });
  if (buf.length === 0) return {}; // as co-body in strict mode: an empty body is an empty object
  try {
    return JSON.parse(buf.toString('utf8'));
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
 * nested too deep or one carrying prototype keys. Plain bodies are read by readJson; compressed ones by koa-body.
 */
export function jsonBodyReader(limitBytes: number): (ctx: Ctx) => Promise<void> {
  const parseEncoded = lazyKoaBody({
    json: true,
    jsonLimit: limitBytes,
    jsonStrict: true,
    urlencoded: false,
    text: false,
    multipart: false,
    includeUnparsed: false,
  });
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
    const encoding = ctx.get('content-encoding');
    try {
      if (encoding === '' || encoding.toLowerCase() === 'identity')
        (ctx.request as { body?: unknown }).body = await readJson(ctx.req, limitBytes);
      else {
        // Content codings are case-insensitive (RFC 9110 8.4.1); koa-body's inflation matches lower case only.
        ctx.req.headers['content-encoding'] = encoding.toLowerCase();
        await parseEncoded(ctx, async () => undefined);
      }
    } catch (e: any) {
      if (e instanceof ApiError) throw e;
      // A Content-Encoding the body does not match (e.g. gzip header, plain body) fails in zlib, without a status.
      // (koa-body re-wraps errors from another realm as Error('{"code":"Z_..."}'), so the message is checked too.)
      // zlib says Z_DATA_ERROR and the like; brotli ERR__ERROR_FORMAT_... (its code: ERR_BROTLI_...).
      if (/\bZ_[A-Z_]+\b|ERR__ERROR_FORMAT|BROTLI/.test(`${e?.code ?? ''} ${e?.message ?? ''}`))
        throw new ApiError(
          400,
          'The request body could not be decoded with its Content-Encoding.',
          'invalid_request_error',
          null,
          'invalid_body_encoding',
        );
      // The client went away before its body was read (raw-body: "stream is not readable" / "request aborted"):
      // the client's doing, not a 500 with a stack trace in the logs.
      // co-body refuses prototype keys itself in compressed bodies: the same answer as for a plain body.
      if (/forbidden prototype property/.test(`${e?.message ?? ''}`)) {
        throw new ApiError(
          400,
          'The JSON body contains a forbidden key ("__proto__", or "constructor" with a "prototype").',
          'invalid_request_error',
          null,
          'invalid_json',
        );
      }
      if (/stream is not readable|request aborted/.test(`${e?.message ?? ''}`)) {
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

export function jsonBody(limitBytes: number): Koa.Middleware<GatewayState> {
  const read = jsonBodyReader(limitBytes);
  return async (ctx, next) => {
    await read(ctx);
    await next();
  };
}
