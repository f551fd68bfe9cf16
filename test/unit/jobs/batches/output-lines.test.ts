import { derivedFileId, EXPIRED, itemUsageId, outputLine } from '../../../../src/jobs/batches/outputLines';
import { ENDPOINT_MODES, OPERATION_OF } from '../../../../src/jobs/batches/endpoints';
import { RUN_ENDPOINTS } from '../../../../src/files/batchInput';

/** The ids and lines of a batch's output: the same for every run of a step, in OpenAI's batch output format. */

test("an item's usage id is a UUID derived from the batch and the custom_id alone", () => {
  const id = itemUsageId('batch_1', 'req-1');
  expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-8[0-9a-f]{3}-[0-9a-f]{12}$/);
  expect(itemUsageId('batch_1', 'req-1')).toBe(id); // a rerun charges the same record
  expect(itemUsageId('batch_2', 'req-1')).not.toBe(id);
  expect(itemUsageId('batch_1', 'req-2')).not.toBe(id);
  expect(itemUsageId('batch_1', 'req-1 ')).not.toBe(id); // custom_ids are compared exactly
});

test('derived file ids are stable per batch and purpose', () => {
  const out = derivedFileId('batch_1', 'output');
  expect(out).toMatch(/^file-[0-9a-f]{24}$/);
  expect(derivedFileId('batch_1', 'output')).toBe(out);
  expect(derivedFileId('batch_1', 'error')).not.toBe(out);
  expect(derivedFileId('batch_2', 'output')).not.toBe(out);
});

test('an answered line: its id from the usage id, the custom_id, the status and body, a fresh request id', () => {
  const usageId = '0123abcd-0123-4567-89ab-0123456789ab';
  const text = outputLine(usageId, 'req-1', { statusCode: 200, body: { id: 'chatcmpl-1', choices: [] } });
  expect(text.endsWith('\n')).toBe(true);
  expect(text.indexOf('\n')).toBe(text.length - 1); // one line
  const o = JSON.parse(text);
  expect(o).toEqual({
    id: 'batch_req_0123abcd0123456789ab0123456789ab',
    custom_id: 'req-1',
    response: { status_code: 200, request_id: expect.stringMatching(/^req_[0-9a-f]{24}$/), body: o.response.body },
    error: null,
  });
  expect(o.response.body).toEqual({ id: 'chatcmpl-1', choices: [] });
  const again = JSON.parse(outputLine(usageId, 'req-1', { statusCode: 200, body: {} }));
  expect(again.response.request_id).not.toBe(o.response.request_id);
});

test('an unanswered line has no response and says why; a custom_id with newlines stays on one line', () => {
  const text = outputLine('a-b', 'line\n2 "quoted"', null, EXPIRED);
  expect(text.split('\n')).toHaveLength(2);
  expect(JSON.parse(text)).toEqual({
    id: 'batch_req_ab',
    custom_id: 'line\n2 "quoted"',
    response: null,
    error: {
      code: 'batch_expired',
      message: 'This request could not be executed before the completion window expired.',
    },
  });
  expect(JSON.parse(outputLine('x', 'c', { statusCode: 400, body: { error: {} } })).error).toBeNull();
});

test('every endpoint a batch line may run on has its model modes and its operation name', () => {
  expect(Object.keys(ENDPOINT_MODES).sort()).toEqual([...RUN_ENDPOINTS].sort());
  expect(Object.keys(OPERATION_OF).sort()).toEqual([...RUN_ENDPOINTS].sort());
  expect(ENDPOINT_MODES['/v1/embeddings']).toEqual(['embedding']);
  expect(ENDPOINT_MODES['/v1/completions']).toEqual(['completion']);
  for (const e of ['/v1/chat/completions', '/v1/responses', '/v1/messages'] as const)
    expect(ENDPOINT_MODES[e]).toEqual(['chat']);
  const names = Object.values(OPERATION_OF);
  expect(new Set(names).size).toBe(names.length); // usage records tell the endpoints apart
  for (const n of names) expect(n.startsWith('batch.')).toBe(true);
});
