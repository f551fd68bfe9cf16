import { badRequest } from '../errors';
import { isUuid } from './users';
import { clipJson } from '../text';
import { isUnstorableText, unstorableTextMessage } from '../db';

/** Query/body parameter checks for the console API: each failure is a 400 naming the parameter. */

export function intParam(v: unknown, name: string, def: number, min: number, max: number): number {
  if (v === undefined || v === '') return def;
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < min || n > max)
    throw badRequest(`${name} must be an integer from ${min} to ${max}`, name);
  return n;
}

export function optionalIntParam(v: unknown, name: string, min: number, max: number): number | undefined {
  return v === undefined || v === '' ? undefined : intParam(v, name, 0, min, max);
}

export function uuidParam(v: unknown, name: string): string {
  if (!isUuid(v)) throw badRequest(`${name} must be a UUID`, name);
  return v.toLowerCase();
}

const DATE_RE = /^\d{4}-\d{2}-\d{2}$/;
/** Dates the usage queries take: from the epoch (no usage before it) to 9999; Postgres refuses year 0 and earlier. */
const MIN_YEAR = 1970;
const MAX_YEAR = 9999;
export function dateParam(v: unknown, name: string): string {
  if (
    typeof v !== 'string' ||
    !DATE_RE.test(v) ||
    Number.isNaN(Date.parse(`${v}T00:00:00Z`)) ||
    new Date(`${v}T00:00:00Z`).toISOString().slice(0, 10) !== v
  ) {
    throw badRequest(`${name} must be a date YYYY-MM-DD`, name);
  }
  const year = Number(v.slice(0, 4));
  if (year < MIN_YEAR || year > MAX_YEAR)
    throw badRequest(`${name} must be a date in the years ${MIN_YEAR} to ${MAX_YEAR}`, name);
  return v;
}

export function timeZoneParam(v: unknown, def: string): string {
  if (v === undefined || v === '') return def;
  if (typeof v !== 'string' || v.length > 64 || !/^[A-Za-z0-9_+\-/]+$/.test(v))
    throw badRequest('tz must be an IANA time zone name', 'tz');
  try {
    new Intl.DateTimeFormat('en', { timeZone: v });
  } catch {
    throw badRequest(`unknown time zone ${clipJson(v)}`, 'tz');
  }
  return v;
}

export function stringField(
  body: Record<string, unknown>,
  name: string,
  opts: { min?: number; max: number; optional?: boolean },
): string {
  const v = body[name];
  if (v === undefined || v === null || v === '') {
    if (opts.optional) return '';
    throw badRequest(`${name} is required`, name, 'missing_required_parameter');
  }
  if (typeof v !== 'string') throw badRequest(`${name} must be a string`, name);
  if (isUnstorableText(v)) throw badRequest(unstorableTextMessage(name), name);
  const s = v.trim();
  if (s.length < (opts.min ?? 0) || s.length > opts.max)
    throw badRequest(`${name} must be ${opts.min ?? 0} to ${opts.max} characters`, name);
  return s;
}

/**
 * A required string field taken as sent (no trimming: passwords), checked by type, never coerced: String() of a
 * value such as {"toString":1} throws.
 */
export function requiredString(body: Record<string, unknown>, name: string): string {
  const v = body[name];
  if (v === undefined || v === null || v === '')
    throw badRequest(`${name} is required`, name, 'missing_required_parameter');
  if (typeof v !== 'string') throw badRequest(`${name} must be a string`, name);
  return v;
}
