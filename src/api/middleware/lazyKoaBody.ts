import type { KoaBodyMiddlewareOptions } from 'koa-body';
import type { Ctx } from '../requestState';

export type BodyParser = (ctx: Ctx, next: () => Promise<unknown>) => Promise<unknown>;

/**
 * A koa-body parser, built on its first use: koa-body (with formidable and zod) is about 8 MB of resident code,
 * and only multipart uploads and compressed JSON bodies need it.
 */
export function lazyKoaBody(options: Partial<KoaBodyMiddlewareOptions>): BodyParser {
  let parser: BodyParser | null = null;
  return async (ctx, next) => {
    parser ??= (await import('koa-body')).koaBody(options) as unknown as BodyParser;
    return parser(ctx, next);
  };
}
