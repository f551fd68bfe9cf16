import { accountBilling, holdBilling } from '../../../src/modelCall';
import { failureStatus, RoutedPayload } from '../../../src/modelCall/routedCall';
import { GeminiStreamWire } from '../../../src/operations/gemini/streamWire';
import { countTokensEstimate } from '../../../src/operations/gemini/countTokens';
import { fromGeminiUsage } from '../../../src/operations/gemini/native';
import { geminiEmbedCall, openAIEmbeddingList } from '../../../src/operations/embeddings/geminiUpstream';
import { usageOf } from '../../../src/operations/responses/turn';
import { ClientClosed } from '../../../src/net/abort';
import { ApiError } from '../../../src/errors';
import type { ModelConfig } from '../../../src/catalog/catalog';
import type { RouteTry } from '../../../src/modelCall/modelRouter';
import type { ResponseObject } from '../../../src/translate/responsesTypes';
import { RecordingHold } from '../../support/operationCaller';

/** The pure parts of the operations: who pays, failure statuses, payloads per try, and the Gemini shapes. */

const model = {
  id: 'm',
  pricing: { inputPer1MTokens: 1 },
  batchPricing: { inputPer1MTokens: 0.5 },
} as unknown as ModelConfig;

test('account billing pays list prices; a hold pays the prices and names the operation it is given', () => {
  const deps = { credit: {}, limiter: {}, metrics: {}, keys: {} } as never;
  const account = accountBilling(deps);
  expect(account.kind).toBe('account');
  expect(account.pricing(model)).toBe(model.pricing);
  const hold = new RecordingHold();
  const plain = holdBilling(hold);
  expect(plain).toEqual({ kind: 'hold', hold, pricing: expect.any(Function) });
  expect('operation' in plain).toBe(false); // the operation's own name is billed
  expect(plain.pricing(model)).toBe(model.pricing);
  const batch = holdBilling(hold, (m) => m.batchPricing!, 'batch.chat.completions');
  expect(batch.operation).toBe('batch.chat.completions');
  expect(batch.pricing(model)).toEqual({ inputPer1MTokens: 0.5 });
});

test('the status a failed call records: 499 for a client gone, the error status, else 500', () => {
  expect(failureStatus(new ClientClosed())).toBe(499);
  expect(failureStatus(new ApiError(429, 'slow'))).toBe(429);
  expect(failureStatus(Object.assign(new Error('x'), { status: 503 }))).toBe(503);
  expect(failureStatus(Object.assign(new Error('x'), { status: '503' }))).toBe(500);
  expect(failureStatus(new Error('bug'))).toBe(500);
  expect(failureStatus(null)).toBe(500);
  expect(failureStatus('thrown string')).toBe(500);
});

test('a routed payload is serialised again only when a try names another upstream model', () => {
  const body = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };
  const p = new RoutedPayload(body);
  const t = (upstreamModel: string) => ({ deployment: { upstreamModel } }) as RouteTry;
  const first = p.for(t('m'));
  expect(first).toBe(JSON.stringify(body));
  expect(p.for(t('m'))).toBe(first); // the very string: no work on the healthy path
  expect(JSON.parse(p.for(t('m-east')))).toEqual({ ...body, model: 'm-east' });
  expect(p.payload).toBe(p.for(t('m-east')));
});

test('Gemini streams: SSE events, or one JSON array written element by element', () => {
  const sse = new GeminiStreamWire(true);
  expect(sse.headers('u1')).toEqual({
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    'x-accel-buffering': 'no',
    'x-gateway-usage-id': 'u1',
  });
  expect(sse.item({ a: 1 }) + sse.item({ b: 2 }) + sse.end()).toBe('data: {"a":1}\n\ndata: {"b":2}\n\n');

  const array = new GeminiStreamWire(false);
  expect(array.headers('u2')).toEqual({
    'content-type': 'application/json; charset=utf-8',
    'cache-control': 'no-cache',
    'x-gateway-usage-id': 'u2',
  });
  const text = array.item({ a: 1 }) + array.item({ b: 2 }) + array.end();
  expect(text).toBe('[{"a":1}\n,\r\n{"b":2}\n]');
  expect(JSON.parse(text)).toEqual([{ a: 1 }, { b: 2 }]);
  expect(new GeminiStreamWire(false).end()).toBe('[]'); // nothing streamed is still valid JSON
});

test("Gemini's usage as a bill: cached tokens apart, thoughts counted as output and reasoning, audio parts", () => {
  expect(
    fromGeminiUsage({
      promptTokenCount: 100,
      cachedContentTokenCount: 30,
      candidatesTokenCount: 20,
      thoughtsTokenCount: 5,
      promptTokensDetails: [
        { modality: 'AUDIO', tokenCount: 40 },
        { modality: 'TEXT', tokenCount: 60 },
      ],
      candidatesTokensDetails: [{ modality: 'AUDIO', tokenCount: 8 }],
    } as never),
  ).toEqual({
    input: 70,
    cacheRead: 30,
    cacheWrite5m: 0,
    cacheWrite1h: 0,
    output: 25,
    reasoning: 5,
    audioInput: 40,
    audioOutput: 8,
    estimated: false,
  });
  // More cached than prompted (a bad report) cannot make the input negative.
  expect(fromGeminiUsage({ promptTokenCount: 10, cachedContentTokenCount: 50 } as never)).toMatchObject({
    input: 0,
    cacheRead: 10,
    output: 0,
  });
});

test("a response's usage, when the upstream reported both counts", () => {
  expect(usageOf({ usage: { input_tokens: 7, output_tokens: 3 } } as ResponseObject)).toMatchObject({
    input: 7,
    output: 3,
    estimated: false,
  });
  expect(usageOf({ usage: { input_tokens: 7 } } as ResponseObject)).toBeNull();
  expect(usageOf({} as ResponseObject)).toBeNull();
  expect(usageOf(null as unknown as ResponseObject)).toBeNull();
});

test('embeddings on Gemini: one string is one request, an array a batch; token arrays refused naming input', () => {
  expect(geminiEmbedCall({ model: 'e', input: 'hi' } as never)).toEqual({
    requests: [{ content: { parts: [{ text: 'hi' }] } }],
    batch: false,
  });
  expect(geminiEmbedCall({ model: 'e', input: ['a', 'b'], dimensions: 8 } as never)).toEqual({
    requests: [
      { content: { parts: [{ text: 'a' }] }, outputDimensionality: 8 },
      { content: { parts: [{ text: 'b' }] }, outputDimensionality: 8 },
    ],
    batch: true,
  });
  expect(() => geminiEmbedCall({ model: 'e', input: [1, 2] } as never)).toThrow(
    expect.objectContaining({ status: 400, param: 'input', code: 'invalid_value' }),
  );
});

test("the vectors back as OpenAI's list; base64 as little-endian float32 bytes", () => {
  const list = openAIEmbeddingList([[0.5, -1], [2]], 'e', false, 9) as any;
  expect(list).toEqual({
    object: 'list',
    data: [
      { object: 'embedding', index: 0, embedding: [0.5, -1] },
      { object: 'embedding', index: 1, embedding: [2] },
    ],
    model: 'e',
    usage: { prompt_tokens: 9, total_tokens: 9 },
  });
  const b64 = (openAIEmbeddingList([[0.5, -1]], 'e', true, 1) as any).data[0].embedding;
  const bytes = Buffer.from(b64, 'base64');
  expect([bytes.readFloatLE(0), bytes.readFloatLE(4)]).toEqual([0.5, -1]);
});

test('countTokens without an upstream counter: chars / 4 over what the model reads, 3 per message', () => {
  // "Hello there!" is 12 characters: 3 tokens, plus 3 for its one message.
  expect(countTokensEstimate({ contents: [{ role: 'user', parts: [{ text: 'Hello there!' }] }] } as never)).toBe(6);
  const two = {
    generateContentRequest: {
      contents: [
        { role: 'user', parts: [{ text: 'abcd' }] },
        { role: 'model', parts: [{ text: 'efgh' }] },
      ],
    },
  };
  expect(countTokensEstimate(two as never)).toBe(2 + 2 * 3);
  expect(countTokensEstimate({} as never)).toBe(0);
});
