import { Readable } from 'node:stream';
import { isBlank, LineSplitter, LineTooLong, readLines, type Line } from '../../../src/files/lines';
import {
  BatchInputValidator,
  MAX_CUSTOM_ID,
  MAX_FILE_BYTES,
  parseRequestLine,
  type InputProblem,
} from '../../../src/files/batchInput';

/** JSONL read a line at a time, and a batch input file checked as its bytes stream in, as OpenAI checks it. */

const request = (id: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({
    custom_id: id,
    method: 'POST',
    url: '/v1/chat/completions',
    body: { model: 'm', messages: [] },
    ...extra,
  });

/** Splits `text` pushed in pieces of `size` bytes. */
function split(text: string | Buffer, size: number, max?: number): Line[] {
  const s = new LineSplitter(0, 0, max);
  const out: Line[] = [];
  const bytes = Buffer.isBuffer(text) ? text : Buffer.from(text);
  for (let i = 0; i < bytes.length; i += size) s.push(bytes.subarray(i, i + size), (l) => out.push(l));
  const last = s.flush();
  if (last) out.push(last);
  return out;
}

test('lines: numbered from 1, without \\n or a trailing \\r, with the offset after each, any chunking', () => {
  const text = 'a\r\nbb\n\nccc';
  for (const size of [1, 2, 5, 100]) {
    expect(split(text, size).map((l) => [l.no, l.bytes.toString(), l.end])).toEqual([
      [1, 'a', 3],
      [2, 'bb', 6],
      [3, '', 7],
      [4, 'ccc', 10],
    ]);
  }
  expect(split('x\n', 1)).toHaveLength(1); // a final newline opens no empty line
});

test('a line over the maximum is reported with its number, whether or not its end has arrived', () => {
  expect(() => split('ok\n' + 'x'.repeat(11) + '\n', 100, 10)).toThrow(LineTooLong);
  expect(() => split('ok\n' + 'x'.repeat(11), 4, 10)).toThrow(expect.objectContaining({ no: 2 }));
  expect(split('x'.repeat(10) + '\n', 3, 10)).toHaveLength(1);
});

test('reading resumes at an offset with the right line numbers', async () => {
  const text = 'one\ntwo\nthree';
  const lines: [number, string, number][] = [];
  for await (const l of readLines(Readable.from([Buffer.from(text.slice(4))]), 4, 1))
    lines.push([l.no, l.bytes.toString(), l.end]);
  expect(lines).toEqual([
    [2, 'two', 8],
    [3, 'three', 13],
  ]);
});

test('blank lines: only spaces, tabs, CRs and a BOM', () => {
  expect(isBlank(Buffer.from(''))).toBe(true);
  expect(isBlank(Buffer.from(' \t\r'))).toBe(true);
  expect(isBlank(Buffer.from('\ufeff '))).toBe(true);
  expect(isBlank(Buffer.from(' x '))).toBe(false);
  expect(isBlank(Buffer.from('\n'))).toBe(false); // never inside a line anyway
});

const parse = (text: string | Buffer, no = 1) =>
  parseRequestLine({ no, bytes: Buffer.isBuffer(text) ? text : Buffer.from(text), end: 0 });

test('a request line parsed; a BOM is allowed on line 1 only', () => {
  expect(parse(request('a'))).toEqual(JSON.parse(request('a')));
  expect(parse('\ufeff' + request('a'))).toMatchObject({ custom_id: 'a' });
  expect(parse('\ufeff' + request('a'), 2)).toMatchObject({ code: 'invalid_json_line' });
});

test('each bad line is refused with its number and a code', () => {
  const problems: [string | Buffer, Partial<InputProblem>][] = [
    [Buffer.from([0x7b, 0xff, 0x7d]), { code: 'invalid_encoding', message: 'Line 3 is not valid UTF-8.' }],
    ['{"custom_id":', { code: 'invalid_json_line' }],
    ['[1]', { code: 'invalid_request', message: 'Line 3 is not a JSON object.' }],
    [request('a', { extra: 1 }), { message: 'Line 3 has an unknown field "extra".' }],
    [request(''), { code: 'missing_custom_id' }],
    [request('x'.repeat(MAX_CUSTOM_ID + 1)), { message: 'Line 3: custom_id is longer than 512 characters.' }],
    [request('a', { method: 'GET' }), { code: 'invalid_method' }],
    [request('a', { url: '/v1/images/generations' }), { code: 'invalid_url' }],
    [request('a', { body: [] }), { code: 'missing_body' }],
    [request('a', { body: { messages: [] } }), { code: 'missing_model' }],
    [
      request('a', { body: { model: 'm', stream: true } }),
      { message: 'Line 3: body.stream is not supported in a batch.' },
    ],
  ];
  for (const [text, p] of problems) expect(parse(text, 3)).toMatchObject({ line: 3, ...p });
});

/** Validates `text` pushed in pieces of `size`. */
function validate(text: string, size = 7, check?: ConstructorParameters<typeof BatchInputValidator>[1]) {
  const v = new BatchInputValidator(undefined, check);
  const bytes = Buffer.from(text);
  for (let i = 0; i < bytes.length; i += size) v.push(bytes.subarray(i, i + size));
  v.end();
  return v;
}

test('a good file: its requests counted (blank lines skipped), its one model and endpoint', () => {
  const v = validate([request('a'), '', request('b'), '  '].join('\n'));
  expect(v).toMatchObject({ problem: null, requests: 2, model: 'm', endpoint: '/v1/chat/completions' });
  expect(v.bytes).toBe(Buffer.byteLength([request('a'), '', request('b'), '  '].join('\n')));
});

test('rules across lines: unique custom_ids, one model, one endpoint; the first problem is kept', () => {
  expect(validate([request('a'), request('a')].join('\n')).problem).toMatchObject({
    line: 2,
    code: 'duplicate_custom_id',
  });
  const otherModel = request('b', { body: { model: 'n', messages: [] } });
  expect(validate([request('a'), otherModel].join('\n')).problem).toMatchObject({ line: 2, code: 'mismatched_model' });
  const otherUrl = request('b', { url: '/v1/embeddings' });
  expect(validate([request('a'), otherUrl, request('a')].join('\n')).problem).toMatchObject({
    line: 2,
    code: 'mismatched_endpoint',
  });
  // Message batch lines are written by POST /v1/messages/batches, never uploaded.
  expect(validate(request('a', { url: '/v1/messages' })).problem).toMatchObject({ line: 1, code: 'invalid_url' });
  expect(validate('\n \n').problem).toEqual({ line: null, message: 'The file has no requests.', code: 'empty_file' });
  const checked = validate([request('a'), request('b')].join('\n'), 7, (r, no) =>
    r.custom_id === 'b' ? { line: no, message: 'no b', code: 'custom' } : null,
  );
  expect(checked.problem).toEqual({ line: 2, message: 'no b', code: 'custom' });
  expect(checked.requests).toBe(1);
});

test('a file over its size limit (MAX_BATCH_FILE_BYTES) is refused naming it, without reading further', () => {
  const line = request('a') + '\n';
  const v = new BatchInputValidator(line.length + 10);
  v.push(Buffer.from(line));
  v.push(Buffer.from(request('b') + '\n'));
  v.end();
  expect(v.problem).toEqual({
    line: null,
    message: `The file is larger than ${line.length + 10} bytes.`,
    code: 'file_too_large',
  });
  expect(v.requests).toBe(1);
  // The default is OpenAI's 200 MB.
  const big = new BatchInputValidator();
  big.push(Buffer.from(line));
  big.bytes = MAX_FILE_BYTES; // as if 200 MB had passed: one more byte is over
  big.push(Buffer.from(' '));
  expect(big.problem).toMatchObject({ code: 'file_too_large' });
});
