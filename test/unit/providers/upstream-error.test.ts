import { ApiError } from '../../../src/errors';
import { failureOf } from '../../../src/providers/failure';
import { asOpenAIError, isUpstreamError, refusal, UpstreamHttpError } from '../../../src/providers/upstreamError';

test("a refused credential is the gateway's 502, never the upstream's 401", () => {
  for (const status of [401, 403, 407]) {
    const e = refusal('anthropic', status, '{"error":{"message":"invalid x-api-key sk-ant-secret"}}', {});
    expect(e).toBeInstanceOf(ApiError);
    expect(e).toMatchObject({ status: 502, code: 'upstream_error' });
    expect(e.message).not.toContain('sk-ant');
    expect(failureOf(e)?.cls).toBe('auth');
  }
});

test('any other refusal keeps status, kind, body (parsed) and the retry hint, marked for the retry loop', () => {
  const body = '{"error":{"code":429,"message":"Resource exhausted","status":"RESOURCE_EXHAUSTED"}}';
  const e = refusal('gemini', 429, body, { 'retry-after': '7' });
  expect(e).toBeInstanceOf(UpstreamHttpError);
  expect(isUpstreamError(e, 'gemini')).toBe(true);
  expect(isUpstreamError(e, 'anthropic')).toBe(false);
  const u = e as UpstreamHttpError;
  expect(u).toMatchObject({ kind: 'gemini', status: 429, shape: 'gemini', headers: { 'retry-after': '7' } });
  expect(u.parsed).toEqual(JSON.parse(body));
  expect(u.upstreamMessage()).toBe('Resource exhausted');
  expect(failureOf(e)).toMatchObject({ cls: 'rate_limit', retryAfterMs: 7000 });
  expect(new UpstreamHttpError('anthropic', 500, '<html>', {}).parsed).toBeNull();
});

test('in the OpenAI shape: a 4xx keeps its status and message, a 5xx is a 502, the failure class carried over', () => {
  const four = asOpenAIError(refusal('anthropic', 429, '{"type":"error","error":{"message":"slow"}}', {}));
  expect(four).toMatchObject({ status: 429, type: 'rate_limit_error', message: 'slow' });
  expect(failureOf(four)).toMatchObject({ cls: 'rate_limit' });
  const five = asOpenAIError(refusal('anthropic', 529, '{"type":"error","error":{"message":"Overloaded"}}', {}));
  expect(five).toMatchObject({ status: 502, code: 'upstream_error' });
  expect((five as ApiError).message).toContain('Overloaded');
  const other = new Error('x');
  expect(asOpenAIError(other)).toBe(other);
});
