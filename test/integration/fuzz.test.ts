import http from 'node:http';
import path from 'node:path';
import fs from 'node:fs';
import type Router from '@koa/router';
import { startGateway, type TestGateway } from '../support/gateway';
import { createApp } from '../../src/app';
import { verifyProjections } from '../../src/billing/ledger';
import { runAdmin } from '../../src/cli/admin';
import { loadTopupSettings } from '../../src/jobs/topups';
import { cassoSignature } from '../../src/jobs/topups/feeds';
import { createAdminKey } from '../../src/organizations/adminKeys';

/**
 * Fuzz-style robustness test: malformed bodies, headers and paths thrown at every route of the real app.
 * Routes are read from the app's routers at run time, so new routes are covered without editing this file.
 *
 * Every response must hold these invariants: no 5xx; an error (>= 400) has a JSON body in the OpenAI shape
 * (the Anthropic shape on /v1/messages routes); no stack trace or source path in any body. Malformed input
 * must be refused with a 4xx (specific statuses where the contract names one: 401, 404, 413, 415). The server
 * must stay up, and no bad input may change money (ledger projections still equal a rebuild).
 *
 * Deterministic: a seeded PRNG (FUZZ_SEED overrides the seed to explore).
 */

const SEED = Number(process.env.FUZZ_SEED ?? 20240607);
const JSON_LIMIT = 64 * 1024;
const UPLOAD_LIMIT = 128 * 1024;
const CONSOLE_JSON_LIMIT = 16 * 1024;
/** The bank feeds' credentials: the targeted values reach their parsers behind a valid key or signature. */
const SEPAY_KEY = 'fuzz-sepay-key-0123456789';
const CASSO_SECRET = 'fuzz-casso-secret-0123456789';

/** mulberry32: tiny, fast, good enough for test-case generation. */
function prng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number) => Math.floor(next() * n);
  const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)];
  return { next, int, pick };
}
const rnd = prng(SEED);

interface RouteInfo {
  method: string;
  pattern: string;
  sample: string;
}
interface Res {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}
interface Failure {
  case: string;
  method: string;
  path: string;
  status: number;
  problem: string;
  body: string;
}

let gw: TestGateway;
let apiKey: string;
let modelIds: string[];
let consoleAuth: (() => Promise<Record<string, string>>) | null = null;
/**
 * The operator's own account and API key: the limits routes are fuzzed on them (a real key, so values reach
 * Postgres).
 */
let operatorAccount: { accountId: string; keyId: string } | null = null;
let consoleCreds: Record<string, string> | null = null;
const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });
const failures: Failure[] = [];
let requestCount = 0;

function send(
  method: string,
  rawPath: string,
  headers: Record<string, string | string[]> = {},
  body?: Buffer | string,
): Promise<Res> {
  const url = new URL(gw.url);
  requestCount++;
  // An explicit length (unless the case asks for chunked): Node sends a DELETE body with neither header otherwise.
  const h =
    body !== undefined && !('transfer-encoding' in headers)
      ? { ...headers, 'content-length': String(Buffer.byteLength(body)) }
      : headers;
  if (method === 'DELETE' && rawPath.startsWith('/console/api/session')) consoleCreds = null; // may sign out
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: url.hostname, port: url.port, method, path: rawPath, headers: h, agent, timeout: 20_000 },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }),
        );
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`timeout: ${method} ${rawPath}`)));
    req.on('error', reject);
    if (body !== undefined) req.end(body);
    else req.end();
  });
}

/** Every (method, path) the app's routers answer, with a concrete sample path for each pattern. */
function enumerateRoutes(): RouteInfo[] {
  const app = createApp(gw.deps);
  const out: RouteInfo[] = [];
  const routers = (app.middleware as Array<{ router?: Router; routers?: Router[] }>).flatMap(
    (mw) => mw.routers ?? (mw.router ? [mw.router] : []),
  );
  for (const router of routers) {
    for (const layer of router.stack as Array<{ path: string | RegExp; methods: string[] }>) {
      for (const method of layer.methods) {
        if (method === 'HEAD') continue; // answered by the GET layer
        const pattern = String(layer.path);
        let sample: string;
        if (layer.path instanceof RegExp) {
          // A regex route (the console's single-page app): derive a path it matches.
          sample =
            ['/console/fuzz', '/console/keys', '/console/x/y/z'].find((p) => (layer.path as RegExp).test(p)) ??
            '/console/fuzz';
        } else {
          sample = layer.path.replace(/:(\w+)/g, (_m, name: string) =>
            name === 'model'
              ? 'gpt-4o-mini'
              : name === 'spec'
                ? 'gpt-4o-mini:generateContent'
                : name === 'file'
                  ? 'nope.bin'
                  : '00000000-0000-4000-8000-000000000000',
          );
        }
        out.push({ method, pattern, sample });
      }
    }
  }
  return out;
}

/** Garbage for a path parameter, URL-encoded as a client would send it. */
const PARAM_GARBAGE = [
  'nope',
  '..%2F..%2F..%2Fetc%2Fpasswd',
  '%00',
  'x'.repeat(600),
  '%F0%9F%98%80',
  "'%3B%20DROP%20TABLE%20accounts%3B--",
  '-1',
  '1e309',
  '%2e%2e',
  '%ZZ',
  'null',
  '%E0%A4%A',
];
function garbageParamPaths(r: RouteInfo): string[] {
  if (!r.pattern.includes(':')) return [];
  return PARAM_GARBAGE.map((g) => r.pattern.replace(/:(\w+)/g, g));
}

const isMessagesRoute = (p: string) => /^\/v1\/messages(\/|$)/.test(p);
/** The Gemini surface: /v1beta/..., and /v1/models/{model}:{method} (the GenAI SDK's default version). */
const isGeminiRoute = (p: string) => /^\/v1beta\//.test(p) || /^\/v1\/models\/[^/?]*:/.test(p);
type Shape = 'openai' | 'anthropic' | 'gemini' | 'either';
const shapeOf = (p: string): Shape => (isMessagesRoute(p) ? 'anthropic' : isGeminiRoute(p) ? 'gemini' : 'openai');
const isConsoleApi = (p: string) => p.startsWith('/console/api/') || p.startsWith('/console/media/');
/** GET routes anyone may read (health, metrics, the public price list, the console's pages and assets). */
const isPublicGet = (r: { method: string; pattern: string }) =>
  r.method === 'GET' &&
  (/^\/(healthz|readyz|metrics)$/.test(r.pattern) ||
    r.pattern.startsWith('/public/') ||
    r.pattern === '/' ||
    ((r.pattern === '/console' || r.pattern.includes('console')) &&
      !r.pattern.startsWith('/console/api/') &&
      !r.pattern.startsWith('/console/media/')));

/**
 * Routes public by design (no API key or session), each with what it answers to missing or bad credentials and the
 * `{}` body those cases send. Asserted, not skipped: a change that lets them through is caught here.
 */
const errorParam = (res: Res) => JSON.parse(res.body.toString('utf8'))?.error?.param as unknown;
const PUBLIC_BY_DESIGN: Record<string, { status: number; problem: (res: Res) => string | null }> = {
  // VNPay reads its own codes, with HTTP 200 as it requires: 97 for a bad signature (none here).
  'GET /v1/payments/vnpay/ipn': {
    status: 200,
    problem: (res) =>
      res.body.toString('utf8') === JSON.stringify({ RspCode: '97', Message: 'Invalid signature' })
        ? null
        : 'not RspCode 97',
  },
  // The customer back from VNPay: to the console's top-up page, the unsigned result marked invalid.
  'GET /v1/payments/vnpay/return': {
    status: 302,
    problem: (res) => (res.headers.location === '/console/topup?id=&vnpay=invalid' ? null : 'not to the top-up page'),
  },
  // A one-time token is the proof, not a login: without one, a 400 naming it.
  'POST /console/api/invites/accept': {
    status: 400,
    problem: (res) => (errorParam(res) === 'token' ? null : 'does not name the token'),
  },
  // The bank feeds authenticate by their own key or signature.
  'POST /v1/payments/sepay/webhook': { status: 401, problem: () => null },
  'POST /v1/payments/casso/webhook': { status: 401, problem: () => null },
};
/** Routes whose input is in the query string: whatever body is sent is never read. */
const TAKES_NO_BODY = new Set(['DELETE /v1/cache/entries', 'DELETE /console/api/cache/entries']);

const STACK_RE = new RegExp(
  [
    /\n\s+at [^\n]+\(/,
    /\bat (?:async )?[\w.<>]+ \(\//,
    /node_modules\//,
    /\/src\/[\w/]+\.[tj]s/,
    /\.ts:\d+:\d+|\.js:\d+:\d+/,
    /ECONNREFUSED|SyntaxError:|TypeError:|ReferenceError:/,
  ]
    .map((r) => r.source)
    .join('|'),
);
const LEAK_RE = /root:x:0:0|"name": "model-gateway"|PG_VERSION|BEGIN RSA|DATABASE_URL/;

/** Checks the invariants every response must hold, plus the case's expectation; records failures. */
function check(
  caseName: string,
  method: string,
  p: string,
  res: Res,
  expect: 'any' | '4xx' | number | number[],
  shape: Shape = shapeOf(p),
) {
  const text = res.body.toString('utf8');
  const fail = (problem: string) =>
    failures.push({
      case: caseName,
      method,
      path: p.slice(0, 120),
      status: res.status,
      problem,
      body: text.slice(0, 300),
    });
  if (res.status >= 500) fail('5xx');
  if (STACK_RE.test(text)) fail('stack trace or internal detail in body');
  if (LEAK_RE.test(text)) fail('file or secret content leaked');
  if (
    Array.isArray(expect)
      ? !expect.includes(res.status)
      : typeof expect === 'number'
        ? res.status !== expect
        : expect === '4xx'
          ? res.status < 400 || res.status >= 500
          : false
  ) {
    fail(`expected ${Array.isArray(expect) ? expect.join('|') : expect}`);
  }
  if (res.status >= 400 && method !== 'HEAD') {
    if (!/^application\/json/.test(String(res.headers['content-type'] ?? ''))) return fail('error body is not JSON');
    let body: any;
    try {
      body = JSON.parse(text);
    } catch {
      return fail('error body does not parse');
    }
    const openai =
      body &&
      typeof body === 'object' &&
      Object.keys(body).length === 1 &&
      body.error &&
      typeof body.error.message === 'string' &&
      typeof body.error.type === 'string' &&
      'param' in body.error &&
      'code' in body.error;
    const anthropic =
      body &&
      body.type === 'error' &&
      body.error &&
      typeof body.error.type === 'string' &&
      typeof body.error.message === 'string';
    const gemini =
      body &&
      typeof body === 'object' &&
      Object.keys(body).length === 1 &&
      body.error &&
      typeof body.error.code === 'number' &&
      typeof body.error.message === 'string' &&
      typeof body.error.status === 'string';
    if (shape === 'gemini' && !gemini) fail('not the Gemini error shape');
    if (shape === 'openai' && !openai) fail('not the OpenAI error shape');
    if (shape === 'anthropic' && !anthropic) fail('not the Anthropic error shape');
    if (shape === 'either' && !openai && !anthropic && !gemini) fail('no known error shape');
  }
}

// ---------- inputs ----------

const FIELD_NAMES = [
  'model',
  'messages',
  'input',
  'prompt',
  'n',
  'size',
  'seconds',
  'stream',
  'max_tokens',
  'tools',
  'role',
  'content',
  'voice',
  'response_format',
  'temperature',
  'email',
  'password',
  'name',
  'amount',
  'amount_vnd',
  'reason',
  'file',
  'image',
  'system',
  'metadata',
  'instructions',
  'stream_options',
  'tool_choice',
  'duration',
  'resolution',
  'reference_images',
  'previous_response_id',
  '__proto__',
  'constructor',
  '',
  '😀',
  'a\u0000b',
];

function randomString(): string {
  switch (rnd.int(7)) {
    case 0:
      return '';
    case 1:
      return rnd.pick(modelIds);
    case 2:
      return 'x'.repeat(rnd.int(3000));
    case 3:
      return String.fromCharCode(...Array.from({ length: 1 + rnd.int(40) }, () => rnd.int(0xffff)));
    case 4:
      return '\ud800\udfff\ud83d' + '\u202e\u0000\uffff';
    case 5:
      return 'user';
    default:
      return Array.from({ length: rnd.int(30) }, () => rnd.pick('abcXYZ019-_ /.%'.split(''))).join('');
  }
}
function randomValue(depth: number): unknown {
  switch (rnd.int(depth > 3 ? 6 : 9)) {
    case 0:
      return rnd.int(10);
    case 1:
      return rnd.pick([-1, 0, 1.5, 1e20, -1e308, 2 ** 53 + 1, 1e-9]);
    case 2:
      return randomString();
    case 3:
      return rnd.pick([true, false, null]);
    case 4:
      return rnd.pick(modelIds);
    case 5:
      return rnd.pick(['user', 'assistant', 'system', 'tool', 'function']);
    case 6:
      return Array.from({ length: rnd.int(4) }, () => randomValue(depth + 1));
    default: {
      const o: Record<string, unknown> = {};
      for (let i = rnd.int(6); i > 0; i--) o[rnd.pick(FIELD_NAMES)] = randomValue(depth + 1);
      return o;
    }
  }
}
/** Random JSON objects; `__proto__` keys are written literally (JSON.stringify would drop them). */
function randomJsonObject(): string {
  const o: Record<string, unknown> = {};
  for (let i = 1 + rnd.int(6); i > 0; i--) {
    const k = rnd.pick(FIELD_NAMES);
    if (k !== '__proto__') o[k] = randomValue(1);
  }
  const s = JSON.stringify(o);
  return rnd.int(4) === 0 ? s.replace(/^\{/, '{"__proto__":{"isAdmin":true},') : s;
}

/** Malformed JSON-route bodies: [name, body, content-type, expected]. */
function jsonBodyCases(): Array<[string, string | Buffer, string, '4xx' | number]> {
  const json = 'application/json';
  const deepArray = '{"model":"gpt-4o-mini","messages":' + '['.repeat(20000) + ']'.repeat(20000) + '}';
  const deepObject = '{"a":'.repeat(8000) + '1' + '}'.repeat(8000);
  return [
    ['truncated JSON', '{"model": "gpt-4o-mini", "messages": [', json, 400],
    ['garbage bytes', Buffer.from(Array.from({ length: 512 }, () => rnd.int(256))), json, 400],
    ['empty body', '', json, 400],
    ['JSON array', '[1,2,3]', json, 400],
    ['JSON number', '42', json, 400],
    ['JSON string', '"hello"', json, 400],
    ['JSON null', 'null', json, 400],
    ['JSON true', 'true', json, 400],
    ['trailing garbage', '{"model":"gpt-4o-mini"} trailing', json, 400],
    ['single quotes', "{'model': 'gpt-4o-mini'}", json, 400],
    ['NaN literal', '{"model":"gpt-4o-mini","n":NaN}', json, 400],
    ['BOM + JSON', '\ufeff{"model":"gpt-4o-mini"}', json, '4xx'],
    ['deeply nested array', deepArray, json, '4xx'],
    ['deeply nested object', deepObject, json, '4xx'],
    ['huge string', JSON.stringify({ model: 'x'.repeat(JSON_LIMIT - 1000) }), json, '4xx'],
    [
      'unicode and lone surrogates',
      '{"model":"\\ud800\\u0000😀\\u202e","messages":[{"role":"user","content":"\\udfff\\uffff"}],"input":"\\ud83d"}',
      json,
      '4xx',
    ],
    [
      'wrong types',
      JSON.stringify({
        model: 123,
        messages: 'x',
        input: {},
        prompt: [],
        n: -1,
        stream: 'yes',
        size: {},
        seconds: 'abc',
        email: 1,
        password: [],
      }),
      json,
      '4xx',
    ],
    [
      'huge numbers',
      '{"model":"gpt-4o-mini","max_tokens":1e309,"n":99999999999999999999,' +
        '"temperature":-1e308,"seconds":1e309,"amount":1e309}',
      json,
      '4xx',
    ],
    [
      'prototype pollution',
      '{"__proto__":{"isAdmin":true,"role":"operator"},"constructor":{"prototype":{"x":1}},"model":"gpt-4o-mini"}',
      json,
      '4xx',
    ],
    ['empty object', '{}', json, '4xx'],
    ['text/plain', '{"model":"gpt-4o-mini"}', 'text/plain', 415],
    ['xml', '<model>gpt-4o-mini</model>', 'application/xml', 415],
    ['form-urlencoded', 'model=gpt-4o-mini&messages=hi', 'application/x-www-form-urlencoded', 415],
    // 4xx rather than 415: some JSON routes also take multipart (POST /v1/videos, as OpenAI's does).
    [
      'multipart on a JSON route',
      '--x\r\nContent-Disposition: form-data; name="model"\r\n\r\ngpt-4o-mini\r\n--x--\r\n',
      'multipart/form-data; boundary=x',
      '4xx',
    ],
    ['unknown charset', '{"model":"gpt-4o-mini"}', 'application/json; charset=utf-99', '4xx'],
    ['content-type garbage', '{"model":"gpt-4o-mini"}', ';;;=/', 415],
  ];
}

function multipart(
  boundary: string,
  parts: Array<{ name: string; filename?: string; type?: string; data: string | Buffer }>,
  close = true,
): Buffer {
  const chunks: Buffer[] = [];
  for (const p of parts) {
    const filename = p.filename ? `; filename="${p.filename}"` : '';
    const type = p.type ? `Content-Type: ${p.type}\r\n` : '';
    chunks.push(
      Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${p.name}"${filename}\r\n${type}\r\n`),
    );
    chunks.push(Buffer.isBuffer(p.data) ? p.data : Buffer.from(p.data));
    chunks.push(Buffer.from('\r\n'));
  }
  if (close) chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return Buffer.concat(chunks);
}

/** Malformed multipart-route bodies. */
function multipartBodyCases(): Array<[string, Buffer | string, string, '4xx' | number]> {
  const mp = 'multipart/form-data; boundary=fuzzb';
  return [
    ['multipart without boundary', 'garbage', 'multipart/form-data', '4xx'],
    ['multipart with the wrong boundary', multipart('other', [{ name: 'model', data: 'whisper-1' }]), mp, '4xx'],
    [
      'multipart truncated',
      multipart(
        'fuzzb',
        [{ name: 'file', filename: 'a.wav', type: 'audio/wav', data: Buffer.alloc(100) }],
        false,
      ).subarray(0, 90),
      mp,
      '4xx',
    ],
    ['multipart garbage bytes', Buffer.from(Array.from({ length: 700 }, () => rnd.int(256))), mp, '4xx'],
    [
      'multipart fields only',
      multipart('fuzzb', [
        { name: 'model', data: rnd.pick(modelIds) },
        { name: 'prompt', data: 'hi' },
      ]),
      mp,
      '4xx',
    ],
    [
      'multipart empty file, bad model',
      multipart('fuzzb', [
        { name: 'file', filename: 'x.png', type: 'image/png', data: '' },
        { name: 'image', filename: 'x.png', type: 'image/png', data: '' },
        { name: 'model', data: '\u0000' },
      ]),
      mp,
      '4xx',
    ],
    [
      'multipart non-media file',
      multipart('fuzzb', [
        { name: 'file', filename: '../../etc/passwd', type: 'text/plain', data: 'root:y' },
        { name: 'image', filename: '../../x', data: 'zz' },
        { name: 'model', data: 'whisper-1' },
        { name: 'prompt', data: 'x' },
      ]),
      mp,
      '4xx',
    ],
    [
      'multipart too many files',
      multipart(
        'fuzzb',
        Array.from({ length: 12 }, (_, i) => ({
          name: 'file',
          filename: `f${i}.wav`,
          type: 'audio/wav',
          data: 'RIFF',
        })),
      ),
      mp,
      '4xx',
    ],
    [
      'multipart oversized field',
      multipart('fuzzb', [{ name: 'prompt', data: 'p'.repeat(1024 * 1024 + 10) }]),
      mp,
      '4xx',
    ],
    // Above both the configured upload limit and the 10 MB image-input limit of the design.
    [
      'multipart oversized file',
      multipart('fuzzb', [
        { name: 'model', data: 'whisper-1' },
        {
          name: 'file',
          filename: 'big.wav',
          type: 'audio/wav',
          data: Buffer.alloc(Math.max(UPLOAD_LIMIT, 10 * 1024 * 1024) + 4096, 1),
        },
      ]),
      mp,
      413,
    ],
    ['JSON on a multipart route', '{"model":"whisper-1"}', 'application/json', 415],
  ];
}

// ---------- setup ----------

beforeAll(async () => {
  gw = await startGateway({
    logLevel: 'silent',
    maxJsonBytes: JSON_LIMIT,
    maxVideoJsonBytes: JSON_LIMIT,
    maxMessageBatchJsonBytes: JSON_LIMIT,
    maxUploadBytes: UPLOAD_LIMIT,
    maxBatchFileBytes: UPLOAD_LIMIT,
    topups: { ...loadTopupSettings(), sepayApiKey: SEPAY_KEY, cassoSecret: CASSO_SECRET },
  });
  // No balance: a fuzzed request that happens to be valid stops at 402 and never spends anything.
  apiKey = (await gw.account(0, 'fuzz')).key;
  modelIds = gw.deps.catalog.models.map((m) => m.id);
  // Console routes are fuzzed behind a real operator session when the console is part of this build.
  const usersFile = path.join(__dirname, '../../src/console/users.ts');
  if (fs.existsSync(usersFile)) {
    const users = (await import(usersFile)) as {
      createLogin?: (
        db: unknown,
        a: { accountId: string; email: string; password: string; role: string },
      ) => Promise<unknown>;
    };
    if (typeof users.createLogin === 'function') {
      const { accountId, keyId } = await gw.account(0, 'fuzz-operator');
      operatorAccount = { accountId, keyId };
      const email = `fuzz-${Date.now()}@example.com`;
      const password = 'fuzz-password-0123456789';
      await users.createLogin(gw.deps.db, { accountId, email, password, role: 'operator' });
      consoleAuth = async () => {
        const res = await send(
          'POST',
          '/console/api/session',
          { 'content-type': 'application/json', origin: gw.url },
          JSON.stringify({ email, password }),
        );
        if (res.status !== 200) throw new Error(`console sign-in failed: ${res.status} ${res.body.toString()}`);
        const cookie = String(res.headers['set-cookie']?.[0] ?? '').split(';')[0];
        const csrf = JSON.parse(res.body.toString()).csrfToken as string;
        return { cookie, 'x-csrf-token': csrf, origin: gw.url };
      };
    }
  }
});
afterAll(async () => {
  agent.destroy();
  await gw.close();
});

async function credentialsFor(p: string): Promise<Record<string, string>> {
  if (isConsoleApi(p)) {
    if (!consoleAuth) return {};
    consoleCreds ??= await consoleAuth();
    return { ...consoleCreds };
  }
  // Messages clients always send anthropic-version; without it the route refuses before reading the body.
  return { authorization: `Bearer ${apiKey}`, ...(isMessagesRoute(p) ? { 'anthropic-version': '2023-06-01' } : {}) };
}

const BAD_AUTH: Array<[string, Record<string, string>]> = [
  ['no credentials', {}],
  ['unknown bearer key', { authorization: 'Bearer sk-gw-' + 'A'.repeat(32) }],
  ['empty bearer', { authorization: 'Bearer' }],
  ['bearer with spaces', { authorization: 'Bearer a b c' }],
  ['huge bearer', { authorization: 'Bearer sk-gw-' + 'B'.repeat(8000) }],
  ['basic auth', { authorization: 'Basic dXNlcjpwYXNz' }],
  ['latin1 bytes in x-api-key', { 'x-api-key': 'sk-gw-\u00ff\u00fe\u00e9' }],
  ['garbage session cookie', { cookie: 'gw_session=' + 'z'.repeat(200) + '; other=1' }],
];

const WEIRD_HEADERS: Array<[string, Record<string, string>]> = [
  ['huge x-request-id', { 'x-request-id': 'r'.repeat(10_000) }],
  ['odd accept', { accept: 'application/xml;q=nope, */*;q=-1' }],
  ['odd accept-encoding', { 'accept-encoding': 'br;q=2, gzip;q=nope, zstd' }],
  [
    'anthropic-version garbage',
    { 'anthropic-version': '\u00ff' + 'v'.repeat(500), 'anthropic-beta': ',,,'.repeat(100) },
  ],
  ['idempotency-key garbage', { 'idempotency-key': 'k'.repeat(5000) }],
  ['range garbage', { range: 'bytes=99999999999-1,,,-' }],
  ['if-none-match garbage', { 'if-none-match': '"' + 'e'.repeat(3000) }],
  ['x-forwarded-for garbage', { 'x-forwarded-for': '999.999.999.999, ::zz, ' + 'f'.repeat(500) }],
  ['cross-site origin', { origin: 'https://evil.example', 'sec-fetch-site': 'cross-site' }],
];

/** Fails the current test with a readable list of what went wrong, then resets for the next test. */
function expectNoFailures(): void {
  const summary = failures
    .splice(0)
    .slice(0, 40)
    .map((f) => `${f.case} | ${f.method} ${f.path} -> ${f.status}: ${f.problem} | ${f.body}`);
  expect(summary).toEqual([]);
}

// ---------- the fuzz ----------

describe('fuzz: every route survives malformed input', () => {
  let routes: RouteInfo[];
  beforeAll(() => {
    routes = enumerateRoutes();
  });
  afterEach(() => {
    failures.splice(0);
  });

  test('routes are discovered from the app', () => {
    const keys = routes.map((r) => `${r.method} ${r.pattern}`);
    for (const k of [
      'GET /healthz',
      'GET /v1/models',
      'GET /v1/account',
      'POST /v1/chat/completions',
      'POST /v1/messages',
    ])
      expect(keys).toContain(k);
  });

  test('missing or bad credentials: 401 on every protected route', async () => {
    for (const r of routes) {
      for (const [name, headers] of BAD_AUTH) {
        const withBody = r.method !== 'GET';
        const res = await send(
          r.method,
          r.sample,
          { ...headers, ...(withBody ? { 'content-type': 'application/json', origin: gw.url } : {}) },
          withBody ? '{}' : undefined,
        );
        // Public pages may answer; sign-in/sign-out are reachable without a session (then 400 for the empty body,
        // or 204).
        const open = isPublicGet(r) || r.pattern === '/console/api/session';
        const byDesign = PUBLIC_BY_DESIGN[`${r.method} ${r.pattern}`];
        check(`auth: ${name}`, r.method, r.sample, res, open ? 'any' : (byDesign?.status ?? 401));
        const problem = byDesign?.problem(res);
        if (problem)
          failures.push({
            case: `auth: ${name}`,
            method: r.method,
            path: r.sample,
            status: res.status,
            problem,
            body: res.body.toString('utf8').slice(0, 300),
          });
      }
    }
    expectNoFailures();
  }, 240_000);

  test('malformed bodies: 4xx (400, 413, 415 where the contract says so) on every body route', async () => {
    for (const r of routes.filter((x) => x.method !== 'GET')) {
      const creds = await credentialsFor(r.sample);
      if (TAKES_NO_BODY.has(`${r.method} ${r.pattern}`)) {
        // Its input is in the query: any body gets the answer no body gets.
        const none = await send(r.method, r.sample, creds);
        for (const [name, body, type] of jsonBodyCases())
          check(
            `body (not read): ${name}`,
            r.method,
            r.sample,
            await send(r.method, r.sample, { ...creds, 'content-type': type }, body),
            none.status,
          );
        continue;
      }
      // Which body does the route take? A tiny JSON object tells: 415 means multipart; 2xx means none at all.
      const probe = await send(
        r.method,
        r.sample,
        { ...creds, 'content-type': 'application/json' },
        '{"model":"gpt-4o-mini"}',
      );
      check('probe', r.method, r.sample, probe, 'any');
      const truncated = await send(r.method, r.sample, { ...creds, 'content-type': 'application/json' }, '{"model":');
      check('probe', r.method, r.sample, truncated, 'any');
      if (probe.status !== 415 && ![400, 413, 415].includes(truncated.status)) {
        // The route reads no body (sign-out, DELETE /v1/videos/{id}): whatever is sent, only the invariants apply.
        for (const [name, body, type] of jsonBodyCases())
          check(
            `body (ignored): ${name}`,
            r.method,
            r.sample,
            await send(r.method, r.sample, { ...creds, 'content-type': type }, body),
            'any',
          );
        continue;
      }
      if (probe.status === 401 || probe.status === 403) {
        // Unauthorized before the body is read (no credentials for this family): all that matters is a clean 4xx.
        for (const [name, body, type] of jsonBodyCases())
          check(
            `body: ${name}`,
            r.method,
            r.sample,
            await send(r.method, r.sample, { ...creds, 'content-type': type }, body),
            '4xx',
          );
        continue;
      }
      const multipartRoute = probe.status === 415;
      const cases = multipartRoute ? multipartBodyCases() : jsonBodyCases();
      for (const [name, body, type, expected] of cases) {
        const res = await send(r.method, r.sample, { ...creds, 'content-type': type }, body);
        check(`body: ${name}`, r.method, r.sample, res, expected);
      }
      // Oversized: one byte class above the route's limit.
      const limit = isConsoleApi(r.sample) ? CONSOLE_JSON_LIMIT : JSON_LIMIT;
      if (!multipartRoute) {
        const big = JSON.stringify({ model: 'gpt-4o-mini', input: 'x'.repeat(limit + 1024) });
        check(
          'body: oversized JSON',
          r.method,
          r.sample,
          await send(r.method, r.sample, { ...creds, 'content-type': 'application/json' }, big),
          413,
        );
        // Declared with Content-Length but chunked: the limit still holds.
        const chunked = await send(
          r.method,
          r.sample,
          { ...creds, 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
          big,
        );
        check('body: oversized chunked JSON', r.method, r.sample, chunked, 413);
        check(
          'body: gzip header on plain body',
          r.method,
          r.sample,
          await send(
            r.method,
            r.sample,
            { ...creds, 'content-type': 'application/json', 'content-encoding': 'gzip' },
            '{"model":"x"}',
          ),
          '4xx',
        );
        check(
          'body: unknown content-encoding',
          r.method,
          r.sample,
          await send(
            r.method,
            r.sample,
            { ...creds, 'content-type': 'application/json', 'content-encoding': 'zz-nope' },
            '{"model":"x"}',
          ),
          '4xx',
        );
      }
      // Random JSON objects built from the fields routes look at: any status is allowed except 5xx/bad shapes.
      for (let i = 0; i < 12; i++) {
        const res = await send(
          r.method,
          r.sample,
          { ...creds, 'content-type': 'application/json' },
          randomJsonObject(),
        );
        check('body: random JSON', r.method, r.sample, res, 'any');
      }
    }
    expectNoFailures();
  }, 240_000);

  test('weird headers and garbage path parameters on every route', async () => {
    for (const r of routes) {
      const creds = await credentialsFor(r.sample);
      const withBody = r.method !== 'GET';
      for (const [name, headers] of WEIRD_HEADERS) {
        const res = await send(
          r.method,
          r.sample,
          { ...creds, ...headers, ...(withBody ? { 'content-type': 'application/json' } : {}) },
          withBody ? '{}' : undefined,
        );
        check(
          `header: ${name}`,
          r.method,
          r.sample,
          res,
          withBody && r.pattern !== '/console/api/session' ? '4xx' : 'any',
        );
      }
      for (const p of garbageParamPaths(r)) {
        const res = await send(
          r.method,
          p,
          { ...creds, ...(withBody ? { 'content-type': 'application/json' } : {}) },
          withBody ? '{}' : undefined,
        );
        check('garbage path parameter', r.method, p, res, '4xx', shapeOf(p) === 'openai' ? 'either' : shapeOf(p));
      }
    }
    expectNoFailures();
  }, 240_000);

  test('unknown routes and methods: 404/405 JSON errors', async () => {
    const unknown = [
      '/v2/chat/completions',
      '/v1/chat/completion',
      '/v1/nonexistent',
      '/v1/models/a/b/c',
      '/.env',
      '/.git/config',
      '/admin',
      '/wp-login.php',
      '/v1/',
      '/v1',
      '/%00',
      '/v1/%ZZ',
    ];
    for (const p of unknown) {
      for (const method of ['GET', 'POST', 'PUT', 'DELETE', 'PATCH']) {
        const res = await send(
          method,
          p,
          { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
          method === 'GET' ? undefined : '{}',
        );
        check('unknown route', method, p, res, [400, 404]);
      }
    }
    // A known path with a method it does not take (PATCH is taken by the limits routes).
    for (const r of routes.filter((x) => !isPublicGet(x))) {
      const taken = new Set(routes.filter((x) => x.sample === r.sample).map((x) => x.method));
      for (const method of ['PUT', 'PATCH'].filter((m) => !taken.has(m))) {
        const res = await send(
          method,
          r.sample,
          { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
          '{}',
        );
        // /v1/models/{id} is shared: GET is OpenAI's model lookup, POST {model}:{method} the Gemini SDK's call.
        const shared = /^\/v1\/models\//.test(r.sample);
        check('wrong method', method, r.sample, res, [404, 405], shared ? 'either' : shapeOf(r.sample));
      }
    }
    expectNoFailures();
  }, 240_000);

  test('path traversal never reaches a file', async () => {
    const paths = [
      '/v1/../../../../etc/passwd',
      '/../../../etc/passwd',
      '/%2e%2e/%2e%2e/etc/passwd',
      '//etc/passwd',
      '/v1/models/..%2F..%2F..%2Fetc%2Fpasswd',
      '/console/static/..%2F..%2F..%2Fpackage.json',
      '/console/static/%2e%2e%2f%2e%2e%2fpackage.json',
      '/console/static/../../../package.json',
      '/console/static/..%5c..%5cpackage.json',
      '/console/media/jobs/..%2F..%2F/..%2F..%2Fetc%2Fpasswd',
      '/console/media/jobs/x/..%2F..%2F..%2F..%2Fetc%2Fpasswd',
      '/public/..%2f..%2fpackage.json',
      '/v1/responses/..%2F..%2F.data%2Fpg-password',
      '/console/static/.env',
      '/console/static/%00index.html',
    ];
    for (const p of paths) {
      const creds = await credentialsFor(p);
      const res = await send('GET', p, creds);
      // The console's single-page-app shell answers any /console/<page> path; it is a page, not a file read.
      const spaShell =
        /^\/console\/(?!api\/|static\/|media\/)/.test(p) && res.status === 200 && /<html/i.test(res.body.toString());
      check('path traversal', 'GET', p, res, spaShell ? 'any' : '4xx', 'either');
    }
    expectNoFailures();
  });

  test('the server stayed up, and no malformed request changed money', async () => {
    const res = await send('GET', '/healthz');
    expect(res.status).toBe(200);
    expect((await send('GET', '/readyz')).status).toBe(200);
    await gw.deps.credit.flush();
    expect(await verifyProjections(gw.deps.db)).toEqual([]);
    expect(requestCount).toBeGreaterThan(1000);
  });
});

// ---------- targeted values in every field of a valid request ----------

/**
 * A valid body for every body route (method and pattern as the routers declare them). Each field of it, and each
 * field one level down, is replaced in turn by each TARGETED value; extra keys with NUL or lone surrogates are added.
 * A funded account sends them, so nothing stops at 402 before the code under test: money must still only move for
 * answered requests.
 */
const CONSOLE_TOPUP_KEY = 'fuzz-topup-0001';
/** The funded account's organization: a project, one to archive, and a member of both (made in beforeAll). */
const org = { adminKey: '', projectId: '', archiveProjectId: '', userId: '' };
function validBodies(accountId: string): Record<string, Record<string, unknown>> {
  const chat = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], max_tokens: 16 };
  const gemini = { contents: [{ role: 'user', parts: [{ text: 'hi' }] }], generationConfig: { maxOutputTokens: 16 } };
  const webhook = { url: 'https://93.184.216.34/hook', events: ['video.completed'], description: 'fuzz' };
  return {
    'POST /v1/chat/completions': chat,
    'POST /v1/completions': { model: 'gpt-3.5-turbo-instruct', prompt: 'hi', max_tokens: 16 },
    'POST /v1/embeddings': { model: 'text-embedding-3-small', input: 'hi' },
    'POST /v1/audio/speech': { model: 'tts-1', input: 'hi', voice: 'alloy' },
    'POST /v1/images/generations': { model: 'gpt-image-1', prompt: 'a cat', n: 1 },
    'POST /v1/messages': {
      model: 'claude-haiku-4-5',
      max_tokens: 16,
      messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }],
      thinking: { type: 'enabled', budget_tokens: 1024 },
    },
    'POST /v1/messages/batches': {
      requests: [
        {
          custom_id: 'fuzz-1',
          params: { model: 'claude-haiku-4-5', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] },
        },
      ],
    },
    'POST /v1/messages/batches/:id/cancel': {},
    'POST /v1/messages/count_tokens': {
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'hi' }],
      system: 'be brief',
    },
    'POST /v1/responses': {
      model: 'gpt-4o-mini',
      input: [{ role: 'user', content: [{ type: 'input_text', text: 'hi' }] }],
      max_output_tokens: 16,
      store: true,
      metadata: { a: 'b' },
    },
    'POST /v1/videos': {
      model: 'seedance-2-0',
      prompt: 'a calm lake',
      seconds: 4,
      size: '16:9',
      parameters: { camera_fixed: true },
    },
    'POST /v1/batches': {
      input_file_id: 'file-000000000000000000000000',
      endpoint: '/v1/chat/completions',
      completion_window: '24h',
      metadata: { a: 'b' },
    },
    'POST /v1/batches/:id/cancel': {},
    'POST /v1/responses/:id/cancel': {},
    'POST /v1beta/models/:spec': gemini,
    'POST /v1/models/:spec': gemini,
    // An IP literal: the endpoint's host is vetted without a DNS lookup.
    'POST /v1/webhooks': webhook,
    'POST /v1/webhooks/:id/rotate_secret': {},
    'POST /v1/webhooks/:id/deliveries/:did/resend': {},
    'POST /console/api/webhooks': webhook,
    'POST /console/api/webhooks/:id/rotate': {},
    'POST /console/api/batches/:id/cancel': {},
    'POST /console/api/webhooks/:id/deliveries/:did/resend': {},
    'POST /console/api/keys': { name: 'fuzz key' },
    'POST /console/api/session': { email: 'nobody@example.com', password: 'not-a-password-1' },
    'POST /console/api/admin/accounts': { name: 'fuzz account' },
    'POST /console/api/admin/accounts/:id/topups': { amount: 1000, reason: 'fuzz', idempotencyKey: CONSOLE_TOPUP_KEY },
    'POST /console/api/admin/logins': {
      accountId,
      email: 'fuzz-login@example.com',
      password: 'fuzz-password-0123',
      role: 'customer',
    },
    'PATCH /console/api/keys/:id/limits': { ...limits, expiresAt: '2099-01-01T00:00:00Z' },
    'PATCH /console/api/admin/accounts/:id/limits': limits,
    'PATCH /console/api/admin/accounts/:id/keys/:keyId/limits': { ...limits, expiresAt: '2099-12-31T23:59:59+07:00' },
    // Top-ups (docs/payments.md): orders, the balance alert, the bank feeds in their own formats (no order matches).
    'POST /v1/topups': topup,
    'POST /console/api/topups': topup,
    'POST /v1/balance_alert': { low_balance_threshold: 100_000 },
    'POST /v1/payments/sepay/webhook': {
      id: 880001,
      gateway: 'Vietcombank',
      transactionDate: '2026-01-01 10:00:00',
      accountNumber: '0011000000000',
      code: null,
      content: 'fuzz transfer',
      transferType: 'in',
      transferAmount: 50_000,
      accumulated: 50_000,
      subAccount: null,
      referenceCode: 'FT880001',
      description: 'fuzz',
    },
    'POST /v1/payments/casso/webhook': {
      error: 0,
      data: {
        id: 880002,
        reference: 'FT880002',
        description: 'fuzz transfer',
        amount: 50_000,
        runningBalance: 50_000,
        transactionDateTime: '2026-01-01 10:00:00',
        accountNumber: '0011000000000',
        bankName: 'VCB',
      },
    },
    'POST /console/api/admin/topups/transfers/:id/assign': { accountId, reason: 'fuzz' },
    'POST /console/api/admin/topups/transfers/:id/return': { reason: 'fuzz' },
    // The response cache's settings (docs/cache.md).
    'PATCH /v1/cache/settings': cache,
    'PATCH /console/api/cache/settings': cache,
    // Organizations (docs/organizations.md), behind an admin key, on a real project and member (bodyPath).
    'POST /v1/organization/projects': { name: 'fuzz project', external_key_id: null },
    'POST /v1/organization/projects/:project_id': { name: 'fuzz project renamed' },
    'POST /v1/organization/projects/:project_id/archive': {},
    'POST /v1/organization/projects/:project_id/service_accounts': { name: 'fuzz bot' },
    'POST /v1/organization/projects/:project_id/users': { user_id: org.userId, role: 'member' },
    'POST /v1/organization/projects/:project_id/users/:user_id': { role: 'owner' },
    'POST /v1/organization/projects/:project_id/spend_limit': spend,
    'POST /v1/organization/spend_limit': spend,
    // Project rate limits per model, and spend alerts (an unknown alert id is a 404 before its body is read).
    'POST /v1/organization/projects/:project_id/rate_limits/:rate_limit_id': {
      max_requests_per_1_minute: 100_000,
      max_tokens_per_1_minute: 10_000_000,
    },
    'POST /v1/organization/spend_alerts': alert,
    'POST /v1/organization/spend_alerts/:alert_id': alert,
    'POST /v1/organization/projects/:project_id/spend_alerts': alert,
    'POST /v1/organization/projects/:project_id/spend_alerts/:alert_id': alert,
    'POST /v1/organization/admin_api_keys': { name: 'fuzz admin key', expires_in_seconds: 3600 },
    'POST /v1/organization/users/:user_id': { role: 'reader' },
    'POST /v1/organization/invites': {
      email: 'fuzz-invitee@example.com',
      role: 'reader',
      projects: [{ id: org.projectId, role: 'member' }],
    },
    'POST /console/api/invites/accept': { token: 'fuzz-not-a-token', password: 'fuzz-password-0123' },
  };
}
const topup = { amount: 100_000, method: 'vietqr' };
const cache = { enabled: true, default_ttl_seconds: 600, scope: 'account' };
const spend = { threshold_amount: 1_000_000_000, currency: 'VND', interval: 'month' };
const alert = {
  ...spend,
  notification_channel: { type: 'email', recipients: ['fuzz-owner@example.com'], subject_prefix: 'fuzz' },
};
const limits = { rpm: 100_000, tpm: 10_000_000, budgetDayVnd: 1_000_000_000, budgetMonthVnd: 10_000_000_000 };

/** Where a body route is fuzzed: its sample path, but the limits routes on the operator's real account and key. */
function bodyPath(r: RouteInfo): string {
  if (r.pattern.startsWith('/v1/organization/'))
    return r.pattern
      .replace(':project_id', r.pattern.endsWith('/archive') ? org.archiveProjectId : org.projectId)
      .replace(':user_id', org.userId)
      .replace(':rate_limit_id', 'rl-gpt-4o-mini');
  if (!operatorAccount || !r.pattern.endsWith('/limits')) return r.sample;
  return r.pattern
    .replace(':keyId', operatorAccount.keyId)
    .replace(':id', r.pattern.startsWith('/console/api/keys/') ? operatorAccount.keyId : operatorAccount.accountId);
}
const isBodyRoute = (r: RouteInfo) => r.method === 'POST' || r.method === 'PATCH';

function nested(depth: number): unknown {
  let v: unknown = 1;
  for (let i = 0; i < depth; i++) v = i % 2 ? { a: v } : [v];
  return v;
}
const TARGETED: Array<[string, unknown]> = [
  ['NUL', '\u0000'],
  ['NUL inside', 'a\u0000b'],
  ['lone high surrogate', '\ud800'],
  ['lone low surrogate', 'x\udfffy'],
  ['reversed pair', '\udc00\ud800'],
  ['1e20', 1e20],
  ['-1e20', -1e20],
  ['1e308', 1e308],
  ['2^53+1', 2 ** 53 + 1],
  ['-1', -1],
  ['0', 0],
  ['1.5', 1.5],
  ['true', true],
  ['null', null],
  ['empty array', []],
  ['empty object', {}],
  ['number string', '1e20'],
  ['nested 70 deep', nested(70)],
  ['nested 40 deep', nested(40)],
  ['long string', 'x'.repeat(20_000)],
  ['object with NUL key', { 'a\u0000': 1 }],
  ['object with lone-surrogate key', { ['k\ud800']: 'v' }],
  ['array of NUL and surrogates', ['\u0000', '\ud800', 1e20]],
  // Values String() and template literals throw on (a field coerced instead of type-checked is a 500).
  ['object breaking String()', { toString: 1, valueOf: 1 }],
  ['array breaking String()', [{ toString: 1 }]],
  // Dates Postgres refuses (year 0; year 10000 once in UTC).
  ['year 0', '0000-01-01'],
  ['year 10000 in UTC', '9999-12-31T23:59:59-14:00'],
];

type Path = (string | number)[];
/** Each field's path, and each field's one level down. */
function fieldPaths(body: Record<string, unknown>): Path[] {
  const out: Path[] = [];
  for (const [k, v] of Object.entries(body)) {
    out.push([k]);
    if (Array.isArray(v) && v.length) {
      out.push([k, 0]);
      if (v[0] && typeof v[0] === 'object') for (const k2 of Object.keys(v[0] as object)) out.push([k, 0, k2]);
    } else if (v && typeof v === 'object') {
      for (const k2 of Object.keys(v)) out.push([k, k2]);
    }
  }
  return out;
}
function withValue(body: Record<string, unknown>, path: Path, value: unknown): Record<string, unknown> {
  const copy = structuredClone(body);
  let o: any = copy;
  for (const p of path.slice(0, -1)) o = o[p];
  o[path[path.length - 1]] = value;
  return copy;
}

/** Multipart routes: their valid form, each field of which is mutated as text (forms carry strings and bytes). */
function validForms(): Record<
  string,
  Array<{ name: string; filename?: string; type?: string; data: string | Buffer }>
> {
  const fixtures = path.join(__dirname, '../../emulator/fixtures');
  const wav = fs.readFileSync(path.join(fixtures, 'speech.wav'));
  const png = fs.readFileSync(path.join(fixtures, 'last_frame.png'));
  return {
    'POST /v1/audio/transcriptions': [
      { name: 'model', data: 'whisper-1' },
      { name: 'response_format', data: 'json' },
      { name: 'file', filename: 'a.wav', type: 'audio/wav', data: wav },
    ],
    'POST /v1/images/edits': [
      { name: 'model', data: 'gpt-image-1' },
      { name: 'prompt', data: 'a hat' },
      { name: 'n', data: '1' },
      { name: 'image', filename: 'a.png', type: 'image/png', data: png },
    ],
    'POST /v1/files': [
      { name: 'purpose', data: 'batch' },
      {
        name: 'file',
        filename: 'a.jsonl',
        type: 'application/jsonl',
        data: Buffer.from(
          JSON.stringify({ custom_id: 'a', method: 'POST', url: '/v1/embeddings', body: { model: 'm', input: 'x' } }),
        ),
      },
    ],
    'POST /v1/videos': [
      { name: 'model', data: 'seedance-2-0' },
      { name: 'prompt', data: 'a lake' },
      { name: 'seconds', data: '4' },
      { name: 'parameters[camera_fixed]', data: 'true' },
      { name: 'input_reference', filename: 'a.png', type: 'image/png', data: png },
    ],
  };
}
/**
 * Field values a form can carry: NUL, bytes that are not UTF-8 (a lone surrogate's CESU-8 form), numbers out of
 * range.
 */
const FORM_TARGETED: Array<[string, string | Buffer]> = [
  ['NUL', 'a\u0000b'],
  ['CESU-8 lone surrogate', Buffer.from([0x61, 0xed, 0xa0, 0x80, 0x62])],
  ['invalid UTF-8', Buffer.from([0xff, 0xfe, 0xc0])],
  ['1e20', '1e20'],
  ['-1', '-1'],
  ['99999999999999999999', '99999999999999999999'],
  ['empty', ''],
  ['long', 'x'.repeat(20_000)],
  ['JSON', '{"a":[[[[1]]]]}'],
];

/**
 * Field names that would walk into a prototype or nest past the body depth limit (64): a 400 on every multipart
 * route.
 */
const FORM_NAMES: Array<[string, string]> = [
  ['__proto__[x]', '__proto__[polluted]'],
  ['constructor[prototype][x]', 'constructor[prototype][polluted]'],
  ['__proto__', '__proto__'],
  ['parameters[__proto__][x]', 'parameters[__proto__][polluted]'],
  ['70 brackets deep', 'parameters' + '[a]'.repeat(70)],
  ['50,000 brackets deep', 'parameters' + '[a]'.repeat(50_000)],
];
/** Object.prototype as it was before any request: a polluting one would add to it (the app runs in this process). */
const PROTOTYPE_KEYS = Object.getOwnPropertyNames(Object.prototype).sort();

/** Query values for GET routes. */
const QUERY_NAMES = ['limit', 'before', 'after', 'from', 'to', 'tz', 'status', 'order', 'variant'];
const QUERY_VALUES = [
  '%00',
  'a%00b',
  '%ED%A0%80',
  '%F0%9F',
  '%FF',
  '1e20',
  '-1',
  '99999999999999999999',
  '0000-01-01',
  '0001-01-01',
  '9999-12-31',
  '10000-01-01',
  '2026-02-30',
  'NaN',
  '',
  'x'.repeat(600),
  "'%3B--",
  'Asia%2FHo_Chi_Minh%00',
];

describe('fuzz: targeted values in every field, with a funded account', () => {
  const BALANCE = 50_000_000;
  let funded: { accountId: string; key: string };
  let routes: RouteInfo[];
  beforeAll(async () => {
    funded = await gw.account(BALANCE, 'fuzz-funded');
    routes = enumerateRoutes();
    // The organization routes' owner: an admin key of the funded account, two projects and a member of one.
    org.adminKey = (await createAdminKey(gw.deps.db, funded.accountId, { name: 'fuzz' })).value;
    const users = (await import('../../src/console/users')) as {
      createLogin: (db: unknown, a: { accountId: string; email: string; password: string }) => Promise<{ id: string }>;
    };
    org.userId = (
      await users.createLogin(gw.deps.db, {
        accountId: funded.accountId,
        email: `fuzz-member-${Date.now()}@example.com`,
        password: 'fuzz-password-0123456789',
      })
    ).id;
    const orgCall = async (p: string, body: unknown) => {
      const res = await send(
        'POST',
        p,
        { authorization: `Bearer ${org.adminKey}`, 'content-type': 'application/json' },
        JSON.stringify(body),
      );
      if (res.status !== 200) throw new Error(`POST ${p}: ${res.status} ${res.body.toString()}`);
      return JSON.parse(res.body.toString('utf8')) as { id: string };
    };
    org.projectId = (await orgCall('/v1/organization/projects', { name: 'fuzz' })).id;
    org.archiveProjectId = (await orgCall('/v1/organization/projects', { name: 'fuzz archive' })).id;
    await orgCall(`/v1/organization/projects/${org.projectId}/users`, { user_id: org.userId, role: 'member' });
  });
  afterEach(() => {
    failures.splice(0);
  });

  const credsFor = async (p: string): Promise<Record<string, string>> =>
    isConsoleApi(p)
      ? credentialsFor(p)
      : p.startsWith('/v1/organization/')
        ? { authorization: `Bearer ${org.adminKey}` }
        : p === '/v1/payments/sepay/webhook'
          ? { authorization: `Apikey ${SEPAY_KEY}` }
          : {
              authorization: `Bearer ${funded.key}`,
              ...(isMessagesRoute(p) ? { 'anthropic-version': '2023-06-01' } : {}),
            };
  /** Casso signs each body (its keys sorted): every mutation is sent signed, so it reaches the parser. */
  const signedFor = (p: string, body: unknown): Record<string, string> => {
    if (p !== '/v1/payments/casso/webhook') return {};
    const t = String(Date.now());
    return { 'x-casso-signature': `t=${t},v1=${cassoSignature(CASSO_SECRET, t, body)}` };
  };

  test('every body route has a valid body (or form) to mutate', () => {
    const bodies = validBodies(funded.accountId);
    const forms = validForms();
    const bodyRoutes = routes.filter(isBodyRoute).map((r) => `${r.method} ${r.pattern}`);
    expect(bodyRoutes.filter((k) => k.startsWith('PATCH ')).length).toBeGreaterThanOrEqual(3);
    expect(bodyRoutes.filter((k) => !(k in bodies) && !(k in forms))).toEqual([]);
  });

  test('JSON routes: each field as NUL, lone surrogates, huge numbers, deep nesting, wrong types', async () => {
    const bodies = validBodies(funded.accountId);
    for (const r of routes.filter((x) => isBodyRoute(x) && `${x.method} ${x.pattern}` in bodies)) {
      const base = bodies[`${r.method} ${r.pattern}`];
      const target = bodyPath(r);
      const creds = await credsFor(target);
      const send1 = async (name: string, body: Record<string, unknown>) => {
        const res = await send(
          r.method,
          target,
          { ...creds, ...signedFor(target, body), 'content-type': 'application/json' },
          JSON.stringify(body),
        );
        check(`targeted: ${name}`, r.method, target, res, 'any');
      };
      for (const p of fieldPaths(base))
        for (const [name, value] of TARGETED) await send1(`${p.join('.')} = ${name}`, withValue(base, p, value));
      await send1('extra NUL key', { ...base, 'x\u0000y': 1 });
      await send1('extra lone-surrogate key', { ...base, ['\ud800']: { ['\udfff']: '\u0000' } });
    }
    expectNoFailures();
  }, 600_000);

  test('multipart routes: each field value and name as NUL, non-UTF-8 bytes, numbers out of range', async () => {
    const forms = validForms();
    for (const r of routes.filter((x) => x.method === 'POST' && `${x.method} ${x.pattern}` in forms)) {
      const base = forms[`${r.method} ${r.pattern}`];
      const creds = await credsFor(r.sample);
      const type = 'multipart/form-data; boundary=fuzzb';
      const send1 = async (name: string, parts: typeof base) =>
        check(
          `targeted form: ${name}`,
          r.method,
          r.sample,
          await send(r.method, r.sample, { ...creds, 'content-type': type }, multipart('fuzzb', parts)),
          'any',
        );
      for (let i = 0; i < base.length; i++) {
        for (const [name, value] of FORM_TARGETED) {
          if (base[i].filename) {
            await send1(
              `${base[i].name} filename = ${name}`,
              base.map((p, j) => (j === i ? { ...p, filename: value.toString('latin1') } : p)),
            );
          } else {
            await send1(
              `${base[i].name} = ${name}`,
              base.map((p, j) => (j === i ? { ...p, data: value } : p)),
            );
          }
          await send1(
            `${base[i].name} renamed to ${name}`,
            base.map((p, j) => (j === i ? { ...p, name: value.toString('latin1') } : p)),
          );
        }
      }
      for (const [name, field] of FORM_NAMES) {
        const res = await send(
          r.method,
          r.sample,
          { ...creds, 'content-type': type },
          multipart('fuzzb', [...base.slice(0, -1), { name: field, data: 'yes' }, base[base.length - 1]]),
        );
        check(`form field named ${name}`, r.method, r.sample, res, 400);
      }
    }
    expect(Object.getOwnPropertyNames(Object.prototype).sort()).toEqual(PROTOTYPE_KEYS);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expectNoFailures();
  }, 600_000);

  test('GET routes: query parameters with NUL, broken UTF-8, huge numbers, impossible dates and repeats', async () => {
    for (const r of routes.filter((x) => x.method === 'GET' && !isPublicGet(x))) {
      const creds = await credsFor(r.sample);
      for (const q of QUERY_NAMES) {
        for (const v of QUERY_VALUES)
          check(
            `query ${q}=${v.slice(0, 20)}`,
            'GET',
            r.sample,
            await send('GET', `${r.sample}?${q}=${v}`, creds),
            'any',
          );
        check(
          `query ${q} repeated`,
          'GET',
          r.sample,
          await send('GET', `${r.sample}?${q}=1&${q}=2&${q}[]=3`, creds),
          'any',
        );
      }
      check(
        'usage range from year 0',
        'GET',
        r.sample,
        await send('GET', `${r.sample}?from=0000-01-01&to=0000-12-31`, creds),
        'any',
      );
    }
    expectNoFailures();
  }, 600_000);

  test('money moves only for answered requests: errors charge nothing, none reserved, ledger clean', async () => {
    await gw.deps.credit.flush();
    const db = gw.deps.db;
    // Every usage record of an error (other than a stream billed for what it delivered) has cost 0.
    const errorsCharged = await db.query(
      `SELECT status, operation, cost_vnd FROM usage_records
       WHERE account_id = $1 AND status >= 400 AND cost_vnd <> 0 AND NOT (units ? 'estimated')`,
      [funded.accountId],
    );
    expect(errorsCharged.rows).toEqual([]);
    // The ledger charged exactly what the usage records say.
    const charged = await db.query(
      `SELECT COALESCE(sum(amount), 0)::bigint AS n FROM ledger_events WHERE account_id = $1 AND kind = 'charged'`,
      [funded.accountId],
    );
    const used = await db.query(
      'SELECT COALESCE(sum(cost_vnd), 0)::bigint AS n FROM usage_records WHERE account_id = $1',
      [funded.accountId],
    );
    expect(Number(charged.rows[0].n)).toBe(Number(used.rows[0].n));
    // Nothing is still reserved in the credit lease for a request that is over.
    expect(gw.deps.credit.leaseOf(funded.accountId)?.inflight ?? 0).toBe(0);
    // Holds other than the lease and not-yet-finished video jobs and batches (no worker runs here): none.
    const strayHolds = await db.query(
      `SELECT h.id, h.ref_type FROM holds h WHERE h.account_id = $1 AND h.status = 'open'
         AND h.ref_type NOT IN ('lease', 'video_job', 'batch')`,
      [funded.accountId],
    );
    expect(strayHolds.rows).toEqual([]);
    const out: string[] = [];
    const code = await runAdmin(['verify-ledger'], {
      out: (l) => out.push(l),
      err: (l) => out.push(l),
      env: { ...process.env, DATABASE_URL: gw.deps.config.databaseUrl },
    });
    expect({ code, out }).toEqual({ code: 0, out: [expect.stringMatching(/^ok: /)] });
  });
});

/**
 * The batch APIs and the batch upload validator get the JSON routes' mutations: each field of a batch input line
 * (and of a message batch's params) set to every TARGETED value. A line the route it names would refuse is a 400
 * naming the line at upload; what upload accepts, POST /v1/batches bounds and holds without a 5xx.
 */
describe('fuzz: the batch APIs and the batch upload validator', () => {
  let funded: { accountId: string; key: string };
  let routes: RouteInfo[];
  beforeAll(async () => {
    funded = await gw.account(50_000_000, 'fuzz-batches');
    routes = enumerateRoutes();
  });
  afterEach(() => {
    failures.splice(0);
  });
  const auth = () => ({ authorization: `Bearer ${funded.key}` });
  const chatBody = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], max_tokens: 16 };
  const goodLine = { custom_id: 'good', method: 'POST', url: '/v1/chat/completions', body: chatBody };
  /** Values the synchronous route refuses wherever they stand (deeper than 64 levels, text that is not text). */
  const alwaysRefused = (name: string, path: Path) =>
    name === 'nested 70 deep' ||
    (path[0] === 'custom_id' && /NUL|surrogate|reversed pair/.test(name) && !/key/.test(name)) ||
    (path.join('.') === 'body.max_tokens' && ['1e20', '1e308', '2^53+1', '-1', '0', '1.5'].includes(name));

  const upload = async (lines: Buffer) =>
    send(
      'POST',
      '/v1/files',
      { ...auth(), 'content-type': 'multipart/form-data; boundary=fuzzb' },
      multipart('fuzzb', [
        { name: 'purpose', data: 'batch' },
        { name: 'file', filename: 'in.jsonl', type: 'application/jsonl', data: lines },
      ]),
    );

  test('each field of a batch line as NUL, lone surrogates, huge numbers, deep nesting, wrong types', async () => {
    const paths: Path[] = [
      ['custom_id'],
      ['method'],
      ['url'],
      ['body'],
      ...fieldPaths(chatBody).map((p) => ['body', ...p]),
    ];
    const accepted: string[] = [];
    for (const p of paths) {
      for (const [name, value] of TARGETED) {
        const line = withValue(goodLine, p, value);
        const res = await upload(Buffer.from(`${JSON.stringify(goodLine)}\n${JSON.stringify(line)}\n`));
        const what = `batch line ${p.join('.')} = ${name}`;
        check(what, 'POST', '/v1/files', res, alwaysRefused(name, p) ? 400 : 'any');
        const text = res.body.toString('utf8');
        if (res.status === 400 && !/Line 2/.test(text))
          failures.push({ case: what, method: 'POST', path: '/v1/files', status: 400, problem: 'no line', body: text });
        if (res.status === 200) accepted.push(JSON.parse(res.body.toString('utf8')).id);
      }
    }
    // Bytes that are not UTF-8 in a custom_id: never a U+FFFD that no longer matches.
    for (const bad of [Buffer.from([0xff]), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from([0xc0, 0xaf])]) {
      const [head, tail] = JSON.stringify(goodLine).split('good');
      const res = await upload(Buffer.concat([Buffer.from(head + 'x'), bad, Buffer.from(tail + '\n')]));
      check('batch line custom_id with non-UTF-8 bytes', 'POST', '/v1/files', res, 400);
    }
    // What upload accepted is bounded and held without a 5xx (no worker runs here: the holds stay open).
    for (const id of accepted) {
      const body = { input_file_id: id, endpoint: '/v1/chat/completions', completion_window: '24h' };
      const res = await send(
        'POST',
        '/v1/batches',
        { ...auth(), 'content-type': 'application/json' },
        JSON.stringify(body),
      );
      check('batch of an accepted file', 'POST', '/v1/batches', res, 'any');
    }
    expectNoFailures();
  }, 600_000);

  test('POST /v1/batches on a real file, and each message batch param, with the same values', async () => {
    const up = await upload(Buffer.from(JSON.stringify(goodLine) + '\n'));
    expect(up.status).toBe(200);
    const file = JSON.parse(up.body.toString('utf8')).id as string;
    const base = {
      input_file_id: file,
      endpoint: '/v1/chat/completions',
      completion_window: '24h',
      metadata: { a: 'b' },
    };
    for (const p of fieldPaths(base))
      for (const [name, value] of TARGETED) {
        const res = await send(
          'POST',
          '/v1/batches',
          { ...auth(), 'content-type': 'application/json' },
          JSON.stringify(withValue(base, p, value)),
        );
        const textual = typeof value === 'string' && /NUL|surrogate|reversed pair/.test(name);
        check(
          `batch ${p.join('.')} = ${name}`,
          'POST',
          '/v1/batches',
          res,
          textual && p[0] === 'metadata' ? 400 : 'any',
        );
      }
    const params = { model: 'claude-haiku-4-5', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] };
    for (const p of fieldPaths(params))
      for (const [name, value] of TARGETED) {
        const body = { requests: [{ custom_id: 'm', params: withValue(params, p, value) }] };
        const res = await send(
          'POST',
          '/v1/messages/batches',
          { ...auth(), 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
          JSON.stringify(body),
        );
        check(`message batch params.${p.join('.')} = ${name}`, 'POST', '/v1/messages/batches', res, 'any');
        if (p.join('.') === 'max_tokens' && typeof value === 'number' && !(value >= 1 && value <= 64_000))
          check(`message batch params.max_tokens = ${name}`, 'POST', '/v1/messages/batches', res, 400);
      }
    expectNoFailures();
  }, 600_000);

  test('list cursors of the batch APIs with NUL and broken UTF-8; methods no route takes are a 405', async () => {
    for (const p of ['/v1/messages/batches', '/v1/batches', '/v1/files'])
      for (const q of ['after_id', 'before_id', 'after'])
        for (const v of QUERY_VALUES) {
          const headers = { ...auth(), ...(isMessagesRoute(p) ? { 'anthropic-version': '2023-06-01' } : {}) };
          check(`query ${q}=${v.slice(0, 20)}`, 'GET', p, await send('GET', `${p}?${q}=${v}`, headers), 'any');
        }
    for (const r of routes.filter((x) => x.sample.startsWith('/v1/')))
      for (const method of ['TRACE', 'PROPFIND'])
        check(
          `method ${method}`,
          method,
          r.sample,
          await send(method, r.sample, auth()),
          405,
          // /v1/models/{id} is shared between OpenAI's model lookup and the Gemini SDK's calls.
          /^\/v1\/models\//.test(r.sample) ? 'either' : shapeOf(r.sample),
        );
    expectNoFailures();
  }, 600_000);
});
