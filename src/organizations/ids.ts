import { badRequest } from '../errors';

/**
 * Input checks shared by the organization routes: ids and cursors are bounded tokens (an id of another shape can
 * name nothing, so it is a 404 where it is a path segment and a 400 naming the parameter where it is a cursor).
 */
const TOKEN = /^[A-Za-z0-9_.-]{1,80}$/;
export const isToken = (v: unknown): v is string => typeof v === 'string' && TOKEN.test(v);

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const isUuid = (v: unknown): v is string => typeof v === 'string' && UUID.test(v);

type Query = Record<string, string | string[] | undefined>;

/** A single query value (a repeated parameter is a 400: which one was meant is not ours to guess). */
export function one(q: Query, name: string): string | undefined {
  const v = q[name];
  if (Array.isArray(v)) throw badRequest(`'${name}' must be given once.`, name);
  return v;
}

/** `limit`: an integer from 1 to max (OpenAI's lists: 1 to 100, default 20). */
export function limitOf(q: Query, def = 20, max = 100): number {
  const v = one(q, 'limit');
  if (v === undefined) return def;
  const n = Number(v);
  if (!/^\d+$/.test(v) || !Number.isInteger(n) || n < 1 || n > max)
    throw badRequest(`Invalid 'limit': expected an integer from 1 to ${max}.`, 'limit');
  return n;
}

/** A cursor (`after`, `before`): absent, or a token of the list's own ids (else 400 naming it). */
export function cursorOf(q: Query, name: 'after' | 'before' = 'after', check = isToken): string | null {
  const v = one(q, name);
  if (v === undefined || v === '') return null;
  if (!check(v)) throw badRequest(`Invalid '${name}': not an id of this list.`, name);
  return v;
}

export function boolOf(q: Query, name: string, def = false): boolean {
  const v = one(q, name);
  if (v === undefined) return def;
  if (v === 'true') return true;
  if (v === 'false') return false;
  throw badRequest(`Invalid '${name}': expected true or false.`, name);
}

/** Epoch seconds of a timestamp (null stays null). */
export const unix = (d: Date | null): number | null => (d ? Math.floor(d.getTime() / 1000) : null);

/** The OpenAI list envelope of one page: `rows` holds up to limit + 1 rows, the extra one telling `has_more`. */
export function listOf<R, T>(rows: R[], limit: number, render: (r: R) => T & { id: string }) {
  const data = rows.slice(0, limit).map(render);
  return {
    object: 'list' as const,
    data,
    first_id: data.length ? data[0].id : null,
    last_id: data.length ? data[data.length - 1].id : null,
    has_more: rows.length > limit,
  };
}
