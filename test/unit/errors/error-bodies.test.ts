import {
  ApiError,
  badRequest,
  budgetExceeded,
  conflict,
  defaultType,
  InputError,
  insufficientFunds,
  invalidUpstreamResponse,
  modelNotFound,
  notFound,
} from '../../../src/errors';
import { anthropicBody, anthropicType, geminiBody, geminiStatus, openAIBody } from '../../../src/errorBodies';

/** One error type, and its body in each interface's shape (OpenAI, Anthropic, Gemini). */

test('the OpenAI type follows the status unless given', () => {
  const types = [400, 401, 402, 403, 404, 409, 413, 415, 418, 422, 429, 500, 502, 504].map((s) => [s, defaultType(s)]);
  expect(Object.fromEntries(types)).toEqual({
    400: 'invalid_request_error',
    401: 'authentication_error',
    402: 'insufficient_quota',
    403: 'permission_error',
    404: 'invalid_request_error',
    409: 'invalid_request_error',
    413: 'invalid_request_error',
    415: 'invalid_request_error',
    418: 'invalid_request_error',
    422: 'invalid_request_error',
    429: 'rate_limit_error',
    500: 'server_error',
    502: 'server_error',
    504: 'server_error',
  });
  const e = new ApiError(429, 'slow');
  expect(e).toMatchObject({ status: 429, type: 'rate_limit_error', param: null, code: null, headers: {} });
  expect(e).toBeInstanceOf(Error);
  expect(e.message).toBe('slow');
});

test("a client's parameter name is clipped where an error echoes it", () => {
  const e = badRequest('bad', 'p'.repeat(10_000));
  expect(e.param!.length).toBe(256);
  expect(e.param!.endsWith('…')).toBe(true);
  expect(new ApiError(400, 'x', undefined, 'short').param).toBe('short');
});

test('the constructors: status, type, param and code as each case needs', () => {
  expect(badRequest('m', 'f')).toMatchObject({ status: 400, param: 'f', code: 'invalid_value' });
  expect(badRequest('m')).toBeInstanceOf(InputError); // the client's own words: never redacted
  expect(notFound('gone')).toMatchObject({ status: 404, code: 'not_found', param: null });
  expect(modelNotFound('x'.repeat(1000))).toMatchObject({ status: 404, param: 'model', code: 'model_not_found' });
  expect(modelNotFound('x'.repeat(1000)).message.length).toBeLessThan(400);
  expect(insufficientFunds(500, 20)).toMatchObject({
    status: 402,
    type: 'insufficient_quota',
    code: 'insufficient_balance',
    message: 'Insufficient balance: this request needs up to 500 VND, 20 VND available. Top up your account.',
  });
  expect(budgetExceeded(500, 0, 'day').message).toBe(
    "This API key's daily budget is exhausted: this request needs up to 500 VND, 0 VND of the budget is left this day.",
  );
  expect(budgetExceeded(1, 0, 'month')).toMatchObject({ status: 402, code: 'budget_exceeded' });
  expect(conflict('busy')).toMatchObject({ status: 409, code: 'invalid_state' });
  expect(invalidUpstreamResponse()).toMatchObject({ status: 502, type: 'upstream_error', code: 'upstream_error' });
});

test("OpenAI's body", () => {
  expect(openAIBody(badRequest('Bad value.', 'temperature'))).toEqual({
    error: { message: 'Bad value.', type: 'invalid_request_error', param: 'temperature', code: 'invalid_value' },
  });
});

test("Anthropic's body: its types by status; a 402 keeps the gateway's code to tell budget from balance", () => {
  const types = [400, 401, 402, 403, 404, 413, 429, 500, 503, 529, 418].map((s) => anthropicType(s));
  expect(types).toEqual([
    'invalid_request_error',
    'authentication_error',
    'billing_error',
    'permission_error',
    'not_found_error',
    'request_too_large',
    'rate_limit_error',
    'api_error',
    'api_error',
    'overloaded_error',
    'invalid_request_error',
  ]);
  expect(anthropicBody(badRequest('Bad.', 'max_tokens'), 'req_1')).toEqual({
    type: 'error',
    error: { type: 'invalid_request_error', message: 'Bad.' },
    request_id: 'req_1',
  });
  expect(anthropicBody(budgetExceeded(1, 0, 'day'))).toEqual({
    type: 'error',
    error: { type: 'billing_error', message: budgetExceeded(1, 0, 'day').message, code: 'budget_exceeded' },
  });
});

test("Gemini's body: Google's status names; the gateway's code as an ErrorInfo reason", () => {
  const statuses = [400, 401, 402, 403, 404, 409, 413, 429, 499, 500, 501, 503, 504, 529, 418].map(geminiStatus);
  expect(statuses).toEqual([
    'INVALID_ARGUMENT',
    'UNAUTHENTICATED',
    'FAILED_PRECONDITION',
    'PERMISSION_DENIED',
    'NOT_FOUND',
    'ABORTED',
    'INVALID_ARGUMENT',
    'RESOURCE_EXHAUSTED',
    'CANCELLED',
    'INTERNAL',
    'UNIMPLEMENTED',
    'UNAVAILABLE',
    'DEADLINE_EXCEEDED',
    'UNAVAILABLE',
    'FAILED_PRECONDITION',
  ]);
  expect(geminiBody(modelNotFound('m'))).toEqual({
    error: {
      code: 404,
      message: "The model 'm' does not exist or you do not have access to it.",
      status: 'NOT_FOUND',
      details: [{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'model_not_found', domain: 'gateway' }],
    },
  });
  expect(geminiBody(new ApiError(500, 'oops'))).toEqual({ error: { code: 500, message: 'oops', status: 'INTERNAL' } });
});
