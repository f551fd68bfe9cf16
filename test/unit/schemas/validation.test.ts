import { compileForm, compileJson, paramPath } from '../../../src/schemas/compile';
import {
  formNameMessage,
  formNamePath,
  formNameProblem,
  jsonBodyProblem,
  MAX_BODY_DEPTH,
} from '../../../src/schemas/bodyShape';
import { validateChatCompletion } from '../../../src/schemas/chat';
import { validateMessages } from '../../../src/schemas/messages';
import { validateResponses } from '../../../src/schemas/responses';
import { validateEmbedding } from '../../../src/schemas/embeddings';
import { validateEmbedContent, validateGenerateContent } from '../../../src/schemas/gemini';
import { validateImageEditFields } from '../../../src/schemas/images';
import { validateTranscriptionFields } from '../../../src/schemas/audio';
import { MAX_TOKEN_COUNT } from '../../../src/schemas/tokens';
import { ApiError } from '../../../src/errors';

/** Request bodies held to their schemas: each refusal a 400 naming the parameter, in the client's own path. */

function refusal(
  validate: (x: unknown) => void,
  body: unknown,
): { message: string; param: string | null; code: string | null } {
  try {
    validate(body);
  } catch (e) {
    expect(e).toBeInstanceOf(ApiError);
    expect((e as ApiError).status).toBe(400);
    const { message, param, code } = e as ApiError;
    return { message, param, code };
  }
  throw new Error(`accepted: ${JSON.stringify(body)}`);
}

const user = [{ role: 'user', content: 'hi' }];

test('paths as clients write them: indexes in brackets, JSON pointer escapes undone, names clipped', () => {
  expect(paramPath('/messages/0/content/12/text')).toBe('messages[0].content[12].text');
  expect(paramPath('', 'model')).toBe('model');
  expect(paramPath('/tools/1', 'function')).toBe('tools[1].function');
  expect(paramPath('/a~1b/c~0d')).toBe('a/b.c~d');
  expect(paramPath('/' + 'k'.repeat(1000)).length).toBe(256);
});

test('each kind of refusal names the parameter and says what was expected and what came', () => {
  expect(refusal(validateChatCompletion, { model: 'm', messages: [{ role: 'robot', content: 'x' }] })).toEqual({
    message:
      'Invalid value for \'messages[0].role\': "robot". ' +
      'Supported values are: "system", "developer", "user", "assistant", "tool", "function".',
    param: 'messages[0].role',
    code: 'invalid_value',
  });
  expect(refusal(validateChatCompletion, { model: 'm', messages: user, temperature: 3 })).toEqual({
    message: "Invalid 'temperature': expected a value <= 2, but got 3 instead.",
    param: 'temperature',
    code: 'invalid_value',
  });
  expect(refusal(validateChatCompletion, { model: 'm', messages: user, max_tokens: MAX_TOKEN_COUNT + 1 }).param).toBe(
    'max_tokens',
  );
  expect(refusal(validateChatCompletion, { model: 'm', messages: [] })).toMatchObject({ param: 'messages' });
  expect(refusal(validateResponses, { model: 'm', input: 5 })).toEqual({
    message: "Invalid type for 'input': expected string or array, but got integer.",
    param: 'input',
    code: 'invalid_type',
  });
  expect(refusal(validateResponses, { model: 'm' })).toEqual({
    message: "Missing required parameter: 'input'.",
    param: 'input',
    code: 'missing_required_parameter',
  });
  expect(refusal(validateMessages, { model: 'm', max_tokens: 0, messages: user }).param).toBe('max_tokens');
  expect(refusal(validateEmbedding, { model: 'm', input: 'x', encoding_format: 'hex' }).message).toBe(
    'Invalid value for \'encoding_format\': "hex". Supported values are: "float", "base64".',
  );
  expect(refusal(validateGenerateContent, { contents: 'x' }).param).toBe('contents');
  expect(refusal(validateEmbedContent, { content: { parts: [] } }).param).toBe('content.parts');
  expect(refusal(validateChatCompletion, null).message).toMatch(/^Invalid type for '': expected object/);
});

test('a long value is quoted shortened in the message', () => {
  const r = refusal(validateChatCompletion, { model: 'm', messages: [{ role: 'x'.repeat(500), content: 'x' }] });
  expect(r.message).toContain(`"${'x'.repeat(76)}...`);
  expect(r.message.length).toBeLessThan(300);
});

test('JSON bodies are not coerced; form fields (strings) are, in place', () => {
  const json = compileJson<{ n: number }>({ type: 'object', properties: { n: { type: 'integer' } } });
  expect(refusal(json, { n: '2' })).toMatchObject({ param: 'n', code: 'invalid_type' });
  const fields: Record<string, unknown> = { model: 'whisper-1', temperature: '0.5' };
  validateTranscriptionFields(fields);
  expect(fields.temperature).toBe(0.5);
  expect(refusal(validateImageEditFields, { model: 'i', prompt: 'x', n: 'two' })).toMatchObject({ param: 'n' });
  const strict = compileForm({ type: 'object', additionalProperties: false, properties: {} });
  expect(refusal(strict, { extra: '1' })).toEqual({
    message: 'Unrecognized request argument supplied: extra',
    param: 'extra',
    code: 'unknown_parameter',
  });
});

test('form field names: bracket paths, nesting and prototype keys', () => {
  expect(formNamePath('a[b][]')).toEqual(['a', 'b', '']);
  expect(formNamePath('plain')).toEqual(['plain']);
  expect(formNamePath('a[b')).toBeNull();
  expect(formNameProblem('metadata[team]')).toBeNull();
  expect(formNameProblem('a' + '[x]'.repeat(MAX_BODY_DEPTH - 1))).toBeNull();
  expect(formNameProblem('a' + '[x]'.repeat(MAX_BODY_DEPTH))).toBe('too_deep');
  expect(formNameProblem('a' + '['.repeat(50_000))).toBe('too_deep'); // counted before any regular expression
  for (const name of ['__proto__', 'a[__proto__]', 'a[constructor][x]', 'prototype', 'x[prototype]'])
    expect(formNameProblem(name)).toBe('prototype_key');
  expect(formNameMessage('too_deep')).toBe(`The form has a field name nested more than ${MAX_BODY_DEPTH} levels deep.`);
});

test('JSON bodies: depth counted iteratively (no overflow on the input it guards against), poisoned keys', () => {
  const nest = (levels: number) => {
    const root: Record<string, unknown> = {};
    let at = root;
    for (let i = 1; i < levels; i++) at = (at.x = {}) as Record<string, unknown>;
    return root;
  };
  expect(jsonBodyProblem(nest(64), 64)).toBeNull();
  expect(jsonBodyProblem(nest(65), 64)).toBe('too_deep');
  let deepArray: unknown[] = [];
  const top = deepArray;
  for (let i = 0; i < 200_000; i++) deepArray = (deepArray[0] = []) as unknown[];
  expect(jsonBodyProblem(top, 64)).toBe('too_deep');
  expect(jsonBodyProblem(JSON.parse('{"a":[{"__proto__":{"x":1}}]}'), 64)).toBe('prototype_key');
  expect(jsonBodyProblem({ constructor: { prototype: { x: 1 } } }, 64)).toBe('prototype_key');
  expect(jsonBodyProblem({ constructor: 'a string is harmless', prototype: 1 }, 64)).toBeNull();
});
