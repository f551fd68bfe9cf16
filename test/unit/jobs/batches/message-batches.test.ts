import {
  isEnded,
  MAX_MESSAGE_BATCH_REQUESTS,
  messageBatchLines,
  messageBatchView,
  resultOf,
  unrunResult,
} from '../../../../src/jobs/batches/messageBatches';
import type { Batch } from '../../../../src/jobs/batches/repo';
import { ApiError } from '../../../../src/errors';

/** Anthropic's Message Batches mapped onto the gateway's batches: create requests to lines, batches to views. */

const params = (extra: Record<string, unknown> = {}) => ({
  model: 'claude',
  max_tokens: 10,
  messages: [{ role: 'user', content: 'hi' }],
  ...extra,
});

function refusal(body: unknown): { param: string | null; message: string; code: string | null } {
  try {
    messageBatchLines(body, null);
  } catch (e) {
    expect(e).toBeInstanceOf(ApiError);
    expect((e as ApiError).status).toBe(400);
    const { param, message, code } = e as ApiError;
    return { param, message, code: code ?? null };
  }
  throw new Error('accepted');
}

test('requests become input lines on /v1/messages, in order, with their one model', () => {
  const out = messageBatchLines(
    {
      requests: [
        { custom_id: 'a', params: params() },
        { custom_id: 'b-2_X', params: params({ system: 's' }) },
      ],
    },
    null,
  );
  expect(out.model).toBe('claude');
  expect(out.lines.map((l) => JSON.parse(l))).toEqual([
    { custom_id: 'a', method: 'POST', url: '/v1/messages', body: params() },
    { custom_id: 'b-2_X', method: 'POST', url: '/v1/messages', body: params({ system: 's' }) },
  ]);
});

test('each malformed request is refused naming its place in the list', () => {
  expect(refusal(null).param).toBe('requests');
  expect(refusal({}).code).toBe('missing_required_parameter');
  expect(refusal({ requests: [], x: 1 })).toMatchObject({ param: 'x', code: 'unknown_parameter' });
  expect(refusal({ requests: [] }).message).toBe('requests: List should have at least 1 item');
  expect(refusal({ requests: [5] }).param).toBe('requests.0');
  const one = (r: Record<string, unknown>) => refusal({ requests: [{ custom_id: 'ok', params: params() }, r] });
  expect(one({ custom_id: 'a b', params: params() }).param).toBe('requests.1.custom_id');
  expect(one({ custom_id: 'x'.repeat(65), params: params() }).param).toBe('requests.1.custom_id');
  expect(one({ custom_id: 'ok', params: params() }).message).toBe('requests.1.custom_id: duplicate custom_id "ok"');
  expect(one({ custom_id: 'c', params: params(), extra: 1 }).param).toBe('requests.1.extra');
  expect(one({ custom_id: 'c', params: [] }).param).toBe('requests.1.params');
  expect(one({ custom_id: 'c', params: params({ model: '' }) }).param).toBe('requests.1.params.model');
  expect(one({ custom_id: 'c', params: params({ model: 'other' }) })).toMatchObject({
    param: 'requests.1.params.model',
    code: 'mismatched_model',
  });
  expect(one({ custom_id: 'c', params: params({ stream: true }) }).param).toBe('requests.1.params.stream');
  // The /v1/messages route's own limits, mapped into the request's params.
  expect(one({ custom_id: 'c', params: params({ max_tokens: undefined }) })).toMatchObject({
    param: 'requests.1.params.max_tokens',
    code: 'missing_required_parameter',
  });
});

test('more than the maximum number of requests is refused before any is looked at', () => {
  const requests = new Array(MAX_MESSAGE_BATCH_REQUESTS + 1).fill(null);
  expect(refusal({ requests }).message).toBe('requests: a message batch has at most 100000 requests');
});

const at = (s: string) => new Date(`2026-01-01T${s}Z`);
const batch = (b: Partial<Batch>): Batch =>
  ({
    id: 'msgbatch_1',
    status: 'in_progress',
    total: 10,
    completed: 0,
    failed: 0,
    createdAt: at('00:00:00'),
    expiresAt: at('23:59:59'),
    completedAt: null,
    failedAt: null,
    expiredAt: null,
    cancellingAt: null,
    cancelledAt: null,
    errors: null,
    ...b,
  }) as Batch;

test('a running batch: requests still to run are processing; no end, no results yet', () => {
  const v = messageBatchView(batch({ completed: 3, failed: 2 }), 'https://x/results');
  expect(v).toEqual({
    id: 'msgbatch_1',
    type: 'message_batch',
    processing_status: 'in_progress',
    request_counts: { processing: 5, succeeded: 3, errored: 2, canceled: 0, expired: 0 },
    ended_at: null,
    created_at: '2026-01-01T00:00:00.000Z',
    expires_at: '2026-01-01T23:59:59.000Z',
    archived_at: null,
    cancel_initiated_at: null,
    results_url: null,
  });
  expect(isEnded(batch({}))).toBe(false);
  expect(messageBatchView(batch({ status: 'cancelling', cancellingAt: at('01:00:00') }), 'u')).toMatchObject({
    processing_status: 'canceling',
    cancel_initiated_at: '2026-01-01T01:00:00.000Z',
  });
});

test('an ended batch counts what never ran by how it ended', () => {
  const counts = (b: Partial<Batch>, ranFailed?: number) =>
    messageBatchView(batch({ completed: 4, failed: 1, ...b }), 'u', ranFailed).request_counts;
  expect(counts({ status: 'cancelled', cancelledAt: at('02:00:00') })).toEqual({
    processing: 0,
    succeeded: 4,
    errored: 1,
    canceled: 5,
    expired: 0,
  });
  // An expired batch's own `failed` also counts its unrun lines: the ones that ran and failed are given apart.
  expect(counts({ status: 'expired', failed: 6, expiredAt: at('03:00:00') }, 1)).toEqual({
    processing: 0,
    succeeded: 4,
    errored: 1,
    canceled: 0,
    expired: 5,
  });
  expect(counts({ status: 'failed', failedAt: at('00:01:00') })).toMatchObject({ errored: 6, processing: 0 });
  const done = messageBatchView(batch({ status: 'completed', completed: 10, completedAt: at('04:00:00') }), 'u');
  expect(done).toMatchObject({ processing_status: 'ended', ended_at: '2026-01-01T04:00:00.000Z', results_url: 'u' });
  expect(isEnded(batch({ status: 'completed' }))).toBe(true);
});

test('result lines: succeeded, errored with the upstream error, expired, canceled', () => {
  expect(resultOf({ custom_id: 'a', response: { status_code: 200, body: { id: 'msg_1' } } })).toEqual({
    custom_id: 'a',
    result: { type: 'succeeded', message: { id: 'msg_1' } },
  });
  expect(resultOf({ custom_id: 'b', response: null, error: { code: 'batch_expired' } })).toEqual({
    custom_id: 'b',
    result: { type: 'expired' },
  });
  expect(resultOf({ custom_id: 'c', response: null, error: { code: 'batch_cancelled' } }).result).toEqual({
    type: 'canceled',
  });
  const errored = resultOf({
    custom_id: 'd',
    response: { status_code: 429, body: { error: { message: 'slow down', code: 'rate_limit_exceeded' } } },
  });
  expect(errored).toEqual({
    custom_id: 'd',
    result: {
      type: 'errored',
      error: { type: 'error', error: { type: 'rate_limit_error', message: 'slow down' } },
    },
  });
  const noBody = resultOf({ custom_id: 'e', response: null, error: { code: 'x', message: 'went wrong' } });
  expect(noBody.result).toMatchObject({ type: 'errored', error: { error: { message: 'went wrong' } } });
  expect(resultOf({}).custom_id).toBe('');
});

test('a request that never ran gets its batch ending as its result', () => {
  expect(unrunResult(batch({ status: 'expired' }), 'a').result).toEqual({ type: 'expired' });
  expect(unrunResult(batch({ status: 'cancelled' }), 'a').result).toEqual({ type: 'canceled' });
  const failed = unrunResult(batch({ status: 'failed', errors: [{ message: 'input unreadable' }] as never }), 'a');
  expect(failed).toEqual({
    custom_id: 'a',
    result: { type: 'errored', error: { type: 'error', error: { type: 'api_error', message: 'input unreadable' } } },
  });
  expect(unrunResult(batch({ status: 'failed' }), 'a').result).toMatchObject({
    error: { error: { message: 'The batch failed before this request ran.' } },
  });
});
