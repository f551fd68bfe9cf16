import type { Ctx } from './middleware';
import { badRequest } from '../errors';
import { clip, clipJson } from '../text';

/** OpenAI's cursor pagination query (`limit`, `after`, `order`) of a list route, each given at most once. */
export interface ListQuery {
  limit: number;
  after?: string;
  order: 'asc' | 'desc';
  one(k: string): string | undefined;
}

export function listQuery(
  ctx: Ctx,
  o: { maxLimit: number; defaultLimit: number; idPattern: RegExp; what: string },
): ListQuery {
  const q = ctx.query;
  const one = (k: string): string | undefined => {
    const v = q[k];
    if (Array.isArray(v)) throw badRequest(`Invalid '${clip(k)}': give it once.`, k);
    return v;
  };
  const limitRaw = one('limit');
  let limit = o.defaultLimit;
  if (limitRaw !== undefined) {
    if (!/^\d{1,7}$/.test(limitRaw) || Number(limitRaw) < 1 || Number(limitRaw) > o.maxLimit)
      throw badRequest(`Invalid 'limit' ${clipJson(limitRaw)}: an integer from 1 to ${o.maxLimit}.`, 'limit');
    limit = Number(limitRaw);
  }
  const order = one('order') ?? 'desc';
  if (order !== 'asc' && order !== 'desc')
    throw badRequest(`Invalid 'order' ${clipJson(order)}: asc or desc.`, 'order');
  const after = one('after');
  if (after !== undefined && !o.idPattern.test(after))
    throw badRequest(`Invalid 'after' ${clipJson(after)}: the id of ${o.what}.`, 'after');
  return { limit, after, order, one };
}
