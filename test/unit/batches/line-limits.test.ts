import { Catalog, type CatalogFile, type ModelConfig } from '../../../src/catalog/catalog';
import { checkRequestLine, lineLimitProblem, lineProblem, uploadLineCheck } from '../../../src/batches/lineLimits';
import { BatchInputValidator, type BatchRequestLine } from '../../../src/files/batchInput';
import type { Line } from '../../../src/files/lines';
import { KINDS } from '../../../src/providers/kinds';

/**
 * A batch line held to the limits of the route it names (schema, depth, prototype keys, the model's output cap, a
 * custom_id that is real text), at upload and again when it runs: each problem names its line and its field.
 */

const catalog = new Catalog(
  {
    providers: { p: { kind: 'openai', baseUrl: 'http://a' } },
    models: [
      {
        id: 'capped',
        mode: 'chat',
        provider: 'p',
        upstreamModel: 'u',
        pricing: { inputPer1MTokens: 1, outputPer1MTokens: 1 },
        maxOutputTokens: 100,
      } as ModelConfig,
    ],
  } as CatalogFile,
  KINDS,
);

const chat = (extra: Record<string, unknown> = {}) => ({
  model: 'capped',
  messages: [{ role: 'user', content: 'hi' }],
  ...extra,
});
const line = (no: number, o: unknown): Line => ({ no, bytes: Buffer.from(JSON.stringify(o)), end: 0 });
const request = (body: Record<string, unknown>, url = '/v1/chat/completions', custom_id = 'r1') => ({
  custom_id,
  method: 'POST',
  url,
  body,
});

test('a body the route takes has no problem', () => {
  expect(lineLimitProblem(catalog, '/v1/chat/completions', 'r1', chat({ max_tokens: 100 }))).toBeNull();
  expect(lineLimitProblem(catalog, '/v1/embeddings', 'r1', { model: 'capped', input: ['a', 'b'] })).toBeNull();
  expect(lineLimitProblem(catalog, '/v1/messages', 'r1', { ...chat(), max_tokens: 1 })).toBeNull();
  expect(lineLimitProblem(catalog, '/v1/responses', 'r1', { model: 'capped', input: 'x' })).toBeNull();
  expect(lineLimitProblem(catalog, '/v1/completions', 'r1', { model: 'capped', prompt: 'x' })).toBeNull();
});

test("each endpoint's own schema applies: the problem names the field and the route's code", () => {
  expect(lineLimitProblem(catalog, '/v1/chat/completions', 'r1', { model: 'capped' })).toEqual({
    message: "Missing required parameter: 'messages'.",
    param: 'messages',
    code: 'missing_required_parameter',
  });
  expect(lineLimitProblem(catalog, '/v1/chat/completions', 'r1', chat({ temperature: 'hot' }))).toMatchObject({
    param: 'temperature',
    code: 'invalid_type',
  });
  expect(lineLimitProblem(catalog, '/v1/embeddings', 'r1', { model: 'capped', input: 5.5 })).toMatchObject({
    param: 'input',
  });
  // /v1/messages requires max_tokens, which chat does not.
  expect(lineLimitProblem(catalog, '/v1/messages', 'r1', chat())).toMatchObject({
    param: 'max_tokens',
    code: 'missing_required_parameter',
  });
});

test("the model's output cap applies under every name of the cap, when the catalog knows the model", () => {
  for (const [url, p] of [
    ['/v1/chat/completions', 'max_tokens'],
    ['/v1/chat/completions', 'max_completion_tokens'],
    ['/v1/responses', 'max_output_tokens'],
  ] as const) {
    const body = url === '/v1/responses' ? { model: 'capped', input: 'x', [p]: 101 } : chat({ [p]: 101 });
    expect(lineLimitProblem(catalog, url, 'r1', body)).toEqual({
      message: `${p} is too large: 101. This model supports at most 100 completion tokens.`,
      param: p,
      code: 'invalid_value',
    });
    expect(lineLimitProblem(null, url, 'r1', body)).toBeNull(); // no catalog: left to the run
  }
  // A model the catalog does not know is batch creation's 404, not a line problem.
  expect(lineLimitProblem(catalog, '/v1/chat/completions', 'r1', chat({ model: 'nope', max_tokens: 1e6 }))).toBeNull();
});

test('a custom_id that is not real text, a body too deep or with a prototype key', () => {
  for (const id of ['a\u0000b', 'half \ud800 pair', '\udc00'])
    expect(lineLimitProblem(catalog, '/v1/chat/completions', id, chat())).toMatchObject({
      param: 'custom_id',
      code: 'invalid_custom_id',
    });
  expect(lineLimitProblem(catalog, '/v1/chat/completions', 'ok 😀', chat())).toBeNull(); // a whole pair is fine
  let deep: Record<string, unknown> = {};
  const body = chat({ metadata: deep });
  for (let i = 0; i < 200; i++) deep = (deep.x = {}) as Record<string, unknown>;
  expect(lineLimitProblem(catalog, '/v1/chat/completions', 'r1', body)).toMatchObject({
    param: 'body',
    code: 'invalid_json',
  });
  const proto = JSON.parse('{"model":"capped","messages":[],"__proto__":{"admin":true}}');
  expect(lineLimitProblem(catalog, '/v1/chat/completions', 'r1', proto)).toMatchObject({
    param: 'body',
    message: 'body contains a forbidden key ("__proto__", or "constructor" with a "prototype").',
  });
});

test('a problem names its line, and the field inside the body when there is one', () => {
  expect(lineProblem(7, { message: 'm.', param: 'max_tokens', code: 'c' })).toEqual({
    line: 7,
    message: 'Line 7 (body.max_tokens): m.',
    code: 'c',
  });
  expect(lineProblem(2, { message: 'm.', param: 'custom_id', code: 'c' }).message).toBe('Line 2: m.');
  expect(lineProblem(2, { message: 'm.', param: 'body', code: 'c' }).message).toBe('Line 2: m.');
  expect(lineProblem(2, { message: 'm.', param: null, code: 'c' }).message).toBe('Line 2: m.');
});

test('checkRequestLine: the parse problem, the limit problem, or the parsed request', () => {
  expect(checkRequestLine(catalog, line(4, { ...request(chat()), method: 'GET' }))).toEqual({
    line: 4,
    message: 'Line 4: method must be "POST".',
    code: 'invalid_method',
  });
  expect(checkRequestLine(catalog, { no: 5, bytes: Buffer.from('{"custom_id":'), end: 0 })).toMatchObject({
    line: 5,
    code: 'invalid_json_line',
  });
  expect(checkRequestLine(catalog, line(3, request(chat({ max_completion_tokens: 500 }))))).toEqual({
    line: 3,
    message:
      'Line 3 (body.max_completion_tokens): max_completion_tokens is too large: 500. ' +
      'This model supports at most 100 completion tokens.',
    code: 'invalid_value',
  });
  const ok = checkRequestLine(catalog, line(1, request(chat())));
  expect(ok).toEqual(request(chat()));
});

test("an upload stops at the first line over its route's limits, with that line's number", () => {
  const v = new BatchInputValidator(undefined, uploadLineCheck(catalog));
  const file = [request(chat(), '/v1/chat/completions', 'a'), request(chat({ max_tokens: 101 }), undefined, 'b')]
    .map((r) => JSON.stringify(r))
    .join('\n');
  v.push(Buffer.from(file));
  v.end();
  expect(v.requests).toBe(1);
  expect(v.problem).toEqual({
    line: 2,
    message:
      'Line 2 (body.max_tokens): max_tokens is too large: 101. This model supports at most 100 completion tokens.',
    code: 'invalid_value',
  });
  const check = uploadLineCheck(null);
  expect(check(request(chat({ max_tokens: 101 })) as BatchRequestLine, 9)).toBeNull();
  expect(check(request({ model: 'capped' }) as BatchRequestLine, 9)).toMatchObject({ line: 9 });
});
