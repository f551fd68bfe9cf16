import Ajv, { type ErrorObject, type Schema } from 'ajv';
import { ApiError, badRequest } from '../errors';
import { clip } from '../text';

/**
 * Body validation with ajv: schemas are compiled once, when their module loads (start-up), and a failure becomes
 * a 400 in the OpenAI shape naming the offending parameter in `error.param` (`messages[0].role` style paths).
 */

// JSON bodies: no coercion, first error only (cheapest; the client fixes one thing at a time anyway).
const jsonAjv = new Ajv({ allErrors: false, strict: false, coerceTypes: false, useDefaults: false });
// Multipart form fields arrive as strings: coerce "2" -> 2 and "0.5" -> 0.5 before checking.
const formAjv = new Ajv({ allErrors: false, strict: false, coerceTypes: true, useDefaults: false });

export type Validator<T> = (data: unknown) => asserts data is T;

function build<T>(ajv: Ajv, schema: Schema): Validator<T> {
  const check = ajv.compile(schema);
  return (data: unknown): asserts data is T => {
    if (!check(data)) throw toApiError(check.errors ?? [], data);
  };
}

/** Compiles a JSON-body schema (call at module load). */
export const compileJson = <T>(schema: Schema): Validator<T> => build<T>(jsonAjv, schema);
/** Compiles a schema for multipart string fields, with type coercion (call at module load). */
export const compileForm = <T>(schema: Schema): Validator<T> => build<T>(formAjv, schema);

/** `/messages/0/role` -> `messages[0].role`. */
export function paramPath(instancePath: string, extra?: string): string {
  const parts = instancePath
    .split('/')
    .slice(1)
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
  if (extra) parts.push(extra);
  let out = '';
  for (const p of parts) out += /^\d+$/.test(p) ? `[${p}]` : out ? `.${p}` : p;
  return clip(out); // the names in it are the client's
}

function valueAt(data: unknown, instancePath: string): unknown {
  let v: any = data;
  for (const p of instancePath.split('/').slice(1)) v = v?.[p.replace(/~1/g, '/').replace(/~0/g, '~')];
  return v;
}

const show = (v: unknown) => {
  const s = JSON.stringify(v);
  return s === undefined ? String(v) : s.length > 80 ? s.slice(0, 77) + '...' : s;
};

function toApiError(errors: ErrorObject[], data: unknown): ApiError {
  const e = errors[0];
  if (!e) return badRequest('Invalid request body.');
  const p = e.params as Record<string, any>;
  switch (e.keyword) {
    case 'required': {
      const param = paramPath(e.instancePath, p.missingProperty);
      return badRequest(`Missing required parameter: '${param}'.`, param, 'missing_required_parameter');
    }
    case 'type': {
      const param = paramPath(e.instancePath);
      const got = jsonType(valueAt(data, e.instancePath));
      return badRequest(
        `Invalid type for '${param}': expected ${[].concat(p.type).join(' or ')}, but got ${got}.`,
        param,
        'invalid_type',
      );
    }
    case 'enum': {
      const param = paramPath(e.instancePath);
      const supported = (p.allowedValues as unknown[]).map((v) => show(v)).join(', ');
      return badRequest(
        `Invalid value for '${param}': ${show(valueAt(data, e.instancePath))}. Supported values are: ${supported}.`,
        param,
        'invalid_value',
      );
    }
    case 'minimum':
    case 'maximum':
    case 'exclusiveMinimum':
    case 'exclusiveMaximum': {
      const param = paramPath(e.instancePath);
      const v = valueAt(data, e.instancePath);
      return badRequest(
        `Invalid '${param}': expected a value ${p.comparison} ${p.limit}, but got ${show(v)} instead.`,
        param,
        'invalid_value',
      );
    }
    case 'additionalProperties': {
      const param = paramPath(e.instancePath, p.additionalProperty);
      return badRequest(`Unrecognized request argument supplied: ${param}`, param, 'unknown_parameter');
    }
    default: {
      const param = paramPath(e.instancePath);
      return badRequest(
        `Invalid '${param || 'body'}': ${e.message ?? 'invalid value'}.`,
        param || null,
        'invalid_value',
      );
    }
  }
}

function jsonType(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}
