import { SseDecoder } from '../../../src/sse/upstreamEvents';
import { StreamUsage } from '../../../src/modelCall/meter';
import { mapUpstreamError, usageFromJson } from '../../../src/providers/openai/adapter';
import { paramPath } from '../../../src/schemas/compile';
import { validateChatCompletion } from '../../../src/schemas/chat';
import { validateSpeech } from '../../../src/schemas/audio';
import { ApiError } from '../../../src/errors';

test('SSE decoder yields each event once, across arbitrary chunk boundaries', () => {
  const wire = 'data: {"a":1}\n\ndata: {"b":2}\n\n: keep-alive\n\nevent: x\ndata: [DONE]\n\n';
  for (const size of [1, 3, 7, wire.length]) {
    const dec = new SseDecoder();
    const got: string[] = [];
    const bytes = Buffer.from(wire);
    for (let i = 0; i < bytes.length; i += size)
      got.push(...dec.push(bytes.subarray(i, i + size)).map((e) => `${e.event ?? ''}|${e.data}`));
    got.push(...dec.end().map((e) => e.data));
    expect(got).toEqual(['|{"a":1}', '|{"b":2}', 'x|[DONE]']);
  }
});

test('SSE decoder keeps multi-byte characters split between chunks intact', () => {
  const bytes = Buffer.from('data: {"c":"chào 😀"}\n\n');
  const dec = new SseDecoder();
  const out = [...dec.push(bytes.subarray(0, 18)), ...dec.push(bytes.subarray(18))];
  expect(JSON.parse(out[0].data)).toEqual({ c: 'chào 😀' });
});

test('StreamUsage: upstream usage wins; otherwise ceil(bytes/4) prompt and ceil(delivered chars/4) completion', () => {
  const u = new StreamUsage(401);
  expect(u.observeChat({ choices: [{ delta: { content: 'Hello' } }] })).toBe(false);
  expect(
    u.observeChat({ choices: [{ delta: { tool_calls: [{ function: { name: 'f', arguments: '{"a"' } }] } }] }),
  ).toBe(false);
  expect(u.tokens()).toEqual({ prompt: 101, completion: 3, estimated: true }); // 5 + 1 + 4 = 10 chars
  expect(u.observeChat({ choices: [], usage: { prompt_tokens: 7, completion_tokens: 2, total_tokens: 9 } })).toBe(true);
  expect(u.tokens()).toEqual({ prompt: 7, completion: 2, estimated: false });
  const c = new StreamUsage(8);
  c.observeCompletion({ choices: [{ text: 'abcde' }] });
  expect(c.tokens()).toEqual({ prompt: 2, completion: 2, estimated: true });
  expect(c.observeCompletion({ choices: null, usage: { prompt_tokens: 1, completion_tokens: 1 } })).toBe(true);
});

test('usageFromJson finds the top-level usage without being fooled by content', () => {
  const body = {
    id: 'x',
    choices: [{ message: { content: 'a "usage": {"prompt_tokens": 999} trick' } }],
    usage: { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 },
  };
  expect(usageFromJson(Buffer.from(JSON.stringify(body)))).toEqual(body.usage);
  expect(usageFromJson(Buffer.from(JSON.stringify(body, null, 2)))).toEqual(body.usage);
  expect(usageFromJson(Buffer.from('{"usage": null}'))).toBeNull();
  expect(usageFromJson(Buffer.from('{"data":[]}'))).toBeNull();
  expect(usageFromJson(Buffer.from('not json'))).toBeNull();
});

test('upstream errors: 4xx pass through, credentials and 5xx become 502, 504 stays a timeout', () => {
  const e = mapUpstreamError(
    400,
    JSON.stringify({
      error: {
        message: 'bad thing',
        type: 'invalid_request_error',
        param: 'messages',
        code: 'context_length_exceeded',
      },
    }),
  );
  expect(e).toMatchObject({ status: 400, message: 'bad thing', param: 'messages', code: 'context_length_exceeded' });
  expect(mapUpstreamError(429, '{"error":{"message":"slow down"}}', '3')).toMatchObject({
    status: 429,
    headers: { 'retry-after': '3' },
  });
  expect(mapUpstreamError(401, '{"error":{"message":"bad key"}}')).toMatchObject({
    status: 502,
    code: 'upstream_error',
  });
  expect(mapUpstreamError(503, '<html>down</html>')).toMatchObject({ status: 502, type: 'upstream_error' });
  expect(mapUpstreamError(504, '')).toMatchObject({ status: 504, code: 'upstream_timeout' });
});

test('schema errors name the parameter', () => {
  const err = (f: () => void) => {
    try {
      f();
    } catch (e) {
      return e as ApiError;
    }
    throw new Error('no error');
  };
  expect(paramPath('/messages/0/content/1/type')).toBe('messages[0].content[1].type');
  expect(
    err(() => validateChatCompletion({ model: 'm', messages: [{ role: 'user', content: 'x' }], temperature: 2.5 })),
  ).toMatchObject({ status: 400, param: 'temperature', code: 'invalid_value' });
  expect(err(() => validateChatCompletion({ model: 'm', messages: [{ content: 'x' }] }))).toMatchObject({
    param: 'messages[0].role',
    code: 'missing_required_parameter',
  });
  expect(err(() => validateChatCompletion({ model: 'm', messages: 'hi' }))).toMatchObject({
    param: 'messages',
    code: 'invalid_type',
  });
  expect(
    err(() =>
      validateChatCompletion({
        model: 'm',
        messages: [{ role: 'user', content: 'x' }],
        stop: ['a', 'b', 'c', 'd', 'e'],
      }),
    ),
  ).toMatchObject({ param: 'stop' });
  expect(err(() => validateSpeech({ model: 'tts-1', input: 'x', voice: 'bob' })).message).toMatch(
    /Supported values are: "alloy", "echo"/,
  );
  // Unknown fields are allowed (passed through).
  expect(() =>
    validateChatCompletion({ model: 'm', messages: [{ role: 'user', content: 'x' }], vendor_thing: 1 }),
  ).not.toThrow();
});
