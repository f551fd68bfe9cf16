import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import type { ValidateFunction } from 'ajv';
import { readFileSync } from 'node:fs';
import path from 'node:path';

/**
 * OpenAI's published schemas of its Admin API (/organization/* of openai/openai-openapi, copied unchanged into
 * test/fixtures/openai-admin-openapi.json; its `_source` names the commit), compiled with Ajv as JSON Schema 2020-12
 * (OpenAPI 3.1's dialect). `checkAnswer` validates one answer of a gateway route against the schema its path and
 * status have there: an error against OpenAI's ErrorResponse.
 */
// Read, not imported: the type checker need not infer a type for 400 kB of JSON.
const spec = JSON.parse(readFileSync(path.join(__dirname, '../fixtures/openai-admin-openapi.json'), 'utf8'));
const ajv = new Ajv2020({ strict: false, allErrors: true, validateSchema: false });
addFormats(ajv);
ajv.addFormat('unixtime', true);
ajv.addSchema(spec, 'openai');

const paths = Object.keys(spec.paths) as string[];
const compiled = new Map<string, ValidateFunction>();

const pointer = (...parts: string[]) => parts.map((p) => p.replace(/~/g, '~0').replace(/\//g, '~1')).join('/');

function templateOf(urlPath: string): string {
  const bare = urlPath.replace(/^\/v1/, '').split('?')[0];
  const found = paths.find((t) => new RegExp(`^${t.replace(/\{[^}]+\}/g, '[^/]+')}$`).test(bare));
  if (!found) throw new Error(`${urlPath} is no path of OpenAI's Admin API`);
  return found;
}

function validatorFor(ref: string): ValidateFunction {
  let v = compiled.get(ref);
  if (!v) {
    v = ajv.compile({ $ref: ref });
    compiled.set(ref, v);
  }
  return v;
}

/**
 * The answer with each `currency: "VND"` read as OpenAI's `USD`: the one deliberate difference (amounts are whole
 * VND here, docs/organizations.md); some of OpenAI's schemas allow USD alone, and all else must match them.
 */
function inUsd(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(inUsd);
  if (v === null || typeof v !== 'object') return v;
  return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, k === 'currency' && x === 'VND' ? 'USD' : inUsd(x)]));
}

/** Throws, naming the schema and what failed, unless `body` is what OpenAI's description says `method path` answers. */
export function checkAnswer(method: string, path: string, status: number, body: unknown): void {
  let ref: string;
  if (status >= 400) ref = 'openai#/components/schemas/ErrorResponse';
  else {
    const t = templateOf(path);
    const op = spec.paths[t][method.toLowerCase()];
    if (!op) throw new Error(`${method} ${t} is no operation of OpenAI's Admin API`);
    const code = op.responses[String(status)] ? String(status) : '200';
    if (!op.responses[code]?.content?.['application/json']) throw new Error(`${method} ${t} has no JSON ${code}`);
    const at = ['paths', t, method.toLowerCase(), 'responses', code, 'content', 'application/json', 'schema'];
    ref = `openai#/${pointer(...at)}`;
  }
  const v = validatorFor(ref);
  if (!v(inUsd(body)))
    throw new Error(
      `${method} ${path} ${status}: not OpenAI's schema (${ref}):\n` +
        `${JSON.stringify(v.errors, null, 1).slice(0, 2000)}\n${JSON.stringify(body).slice(0, 1000)}`,
    );
}

/**
 * A client of the gateway's /v1/organization/* routes over real HTTP: every JSON answer is checked against OpenAI's
 * schema before the test sees it.
 */
export function adminClient(baseUrl: string, key: string) {
  return async function call(
    method: string,
    path: string,
    body?: unknown,
    opts: { key?: string } = {},
  ): Promise<{ status: number; body: any }> {
    const res = await fetch(baseUrl + path, {
      method,
      headers: {
        authorization: `Bearer ${opts.key ?? key}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
    const text = await res.text();
    const json = text ? JSON.parse(text) : null;
    checkAnswer(method, path, res.status, json);
    return { status: res.status, body: json };
  };
}

/** A fetch for the official `openai` client that checks every /v1/organization/* JSON answer as adminClient does. */
export const checkingFetch: typeof fetch = async (input, init) => {
  const res = await fetch(input, init);
  const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
  if (url.pathname.startsWith('/v1/organization/')) {
    const text = await res.clone().text();
    checkAnswer(init?.method ?? 'GET', url.pathname, res.status, text ? JSON.parse(text) : null);
  }
  return res;
};
