import type { Writable } from 'node:stream';
import type Koa from 'koa';
import { ApiError } from '../../errors';
import { lazyKoaBody } from './lazyKoaBody';
import type { GatewayState } from '../requestState';
import { formNameMessage, formNameProblem, type BodyShapeProblem } from '../../schemas';
import { removeUploads } from '../uploads';
import { clipJson } from '../../text';

const MULTIPART_LIMITS = { maxFiles: 4, maxFields: 50, maxFieldsSize: 1024 * 1024 };

/**
 * formidable's error codes (FormidableError.js) for the limits, by the option each one enforces. Errors reach us
 * either as formidable's own (with `code`) or, from another realm, re-wrapped by koa-body with the fields as JSON
 * in the message.
 */
const LIMIT_CODES: Record<number, 'maxFiles' | 'maxFields' | 'maxFieldsSize' | 'maxFileSize'> = {
  1015: 'maxFiles',
  1007: 'maxFields',
  1006: 'maxFieldsSize',
  1016: 'maxFileSize',
  1009: 'maxFileSize',
};
function exceededLimit(e: unknown): 'maxFiles' | 'maxFields' | 'maxFieldsSize' | 'maxFileSize' | null {
  const err = e as { code?: unknown; message?: unknown } | null;
  let code = err?.code;
  if (typeof code !== 'number' && typeof err?.message === 'string' && err.message.startsWith('{')) {
    try {
      code = (JSON.parse(err.message) as { code?: unknown }).code;
    } catch {}
  }
  if (typeof code === 'number' && code in LIMIT_CODES) return LIMIT_CODES[code];
  const m = /options\.(maxFiles|maxFields|maxFieldsSize|maxFileSize|maxTotalFileSize) \(/.exec(String(err?.message));
  return m
    ? m[1] === 'maxTotalFileSize'
      ? 'maxFileSize'
      : (m[1] as 'maxFiles' | 'maxFields' | 'maxFieldsSize' | 'maxFileSize')
    : null;
}

/**
 * Parts whose name is refused (too deep, a prototype key) are renamed to this mark plus the problem as they arrive:
 * formidable itself assigns `fields[name]`, so a part named `__proto__` would otherwise vanish into the fields'
 * prototype before we could see it. The mark starts with a NUL, so no field the routes read can collide with it.
 */
const REFUSED_NAME = '\u0000refused-name:';

function refusedName(names: Iterable<string>): BodyShapeProblem | null {
  for (const n of names) if (n.startsWith(REFUSED_NAME)) return n.slice(REFUSED_NAME.length) as BodyShapeProblem;
  return null;
}

export interface MultipartOptions {
  maxFiles?: number;
  /**
   * Where each file part's bytes go instead of a temp file (formidable's fileWriteStreamHandler): the file upload
   * API streams them through its validator into storage. Called with formidable's file object.
   */
  fileWriteStreamHandler?: (file: unknown) => Writable;
}

/**
 * Multipart body (transcriptions, image edits, videos): files go to temp files; counts and sizes are limited; field
 * names nested too deep or naming a prototype are a 400 (as in JSON bodies).
 */
export function multipartBody(maxFileBytes: number, opts: MultipartOptions = {}): Koa.Middleware<GatewayState> {
  // The limits this route applies, which its errors name (a route may allow fewer files than the default).
  const maxFiles = opts.maxFiles ?? MULTIPART_LIMITS.maxFiles;
  const parse = lazyKoaBody({
    multipart: true,
    json: false,
    urlencoded: false,
    text: false,
    formidable: {
      maxFileSize: maxFileBytes,
      ...MULTIPART_LIMITS,
      ...(opts.maxFiles ? { maxFiles: opts.maxFiles } : {}),
      ...(opts.fileWriteStreamHandler ? { fileWriteStreamHandler: opts.fileWriteStreamHandler } : {}),
      onPart: (part, handle) => {
        const problem = formNameProblem(part.name ?? '');
        if (problem) part.name = REFUSED_NAME + problem;
        handle(part);
      },
    },
  });
  return async (ctx, next) => {
    if (!ctx.is('multipart/form-data')) {
      throw new ApiError(
        415,
        `Unsupported Content-Type ${clipJson(ctx.get('content-type') || '')}; send multipart/form-data.`,
        'invalid_request_error',
        null,
        'unsupported_media_type',
      );
    }
    try {
      await parse(ctx, async () => undefined);
    } catch (e) {
      switch (exceededLimit(e)) {
        case 'maxFileSize':
          throw new ApiError(
            413,
            `File too large (limit ${maxFileBytes} bytes).`,
            'invalid_request_error',
            'file',
            'file_too_large',
          );
        case 'maxFiles':
          throw new ApiError(
            400,
            `Too many files in the form: at most ${maxFiles}.`,
            'invalid_request_error',
            null,
            'too_many_files',
          );
        case 'maxFields':
          throw new ApiError(
            400,
            `Too many fields in the form: at most ${MULTIPART_LIMITS.maxFields}.`,
            'invalid_request_error',
            null,
            'too_many_fields',
          );
        case 'maxFieldsSize':
          throw new ApiError(
            413,
            `Form fields too large: at most ${MULTIPART_LIMITS.maxFieldsSize} bytes of field data in all.`,
            'invalid_request_error',
            null,
            'fields_too_large',
          );
        default:
          throw new ApiError(400, 'Malformed multipart body.', 'invalid_request_error', null, 'invalid_multipart');
      }
    }
    const files = (ctx.request as unknown as { files?: Record<string, unknown> }).files ?? {};
    const problem = refusedName([...Object.keys((ctx.request.body ?? {}) as object), ...Object.keys(files)]);
    if (problem) {
      await removeUploads(ctx);
      throw new ApiError(400, formNameMessage(problem), 'invalid_request_error', null, 'invalid_multipart');
    }
    await next();
  };
}
