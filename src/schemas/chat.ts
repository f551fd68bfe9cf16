import { compileJson, type Validator } from './compile';
import { nullableTokenCount } from './tokens';

/**
 * POST /v1/chat/completions and POST /v1/completions. Only what the gateway relies on or the OpenAI API itself
 * bounds is checked; every other field passes through to the upstream untouched (OpenAI-compatible clients send
 * many: seed, logit_bias, parallel_tool_calls, reasoning_effort, metadata, ...).
 */

const stop = { type: ['string', 'array', 'null'], items: { type: 'string' }, maxItems: 4 };
const sampling = {
  temperature: { type: 'number', minimum: 0, maximum: 2 },
  top_p: { type: 'number', minimum: 0, maximum: 1 },
  n: { type: 'integer', minimum: 1, maximum: 8 },
  max_tokens: nullableTokenCount,
  presence_penalty: { type: ['number', 'null'], minimum: -2, maximum: 2 },
  frequency_penalty: { type: ['number', 'null'], minimum: -2, maximum: 2 },
  stream: { type: ['boolean', 'null'] },
  stream_options: {
    type: ['object', 'null'],
    properties: { include_usage: { type: 'boolean' } },
  },
  stop,
  seed: { type: ['integer', 'null'] },
  user: { type: 'string' },
};

export interface ChatCompletionBody {
  model: string;
  messages: { role: string; content?: unknown }[];
  stream?: boolean | null;
  stream_options?: { include_usage?: boolean } | null;
  max_tokens?: number | null;
  max_completion_tokens?: number | null;
  n?: number;
  [k: string]: unknown;
}

export const validateChatCompletion: Validator<ChatCompletionBody> = compileJson<ChatCompletionBody>({
  type: 'object',
  required: ['model', 'messages'],
  properties: {
    model: { type: 'string', minLength: 1 },
    messages: {
      type: 'array',
      minItems: 1,
      items: {
        type: 'object',
        required: ['role'],
        properties: {
          role: { enum: ['system', 'developer', 'user', 'assistant', 'tool', 'function'] },
          content: {
            type: ['string', 'array', 'null'],
            items: { type: 'object', required: ['type'], properties: { type: { type: 'string' } } },
          },
          name: { type: 'string' },
          tool_call_id: { type: 'string' },
          tool_calls: { type: 'array', items: { type: 'object' } },
        },
      },
    },
    ...sampling,
    max_completion_tokens: nullableTokenCount,
    logprobs: { type: ['boolean', 'null'] },
    top_logprobs: { type: ['integer', 'null'], minimum: 0, maximum: 20 },
    tools: {
      type: 'array',
      items: {
        type: 'object',
        required: ['type'],
        properties: {
          type: { type: 'string' },
          function: {
            type: 'object',
            required: ['name'],
            properties: { name: { type: 'string', minLength: 1, maxLength: 64 }, parameters: { type: 'object' } },
          },
        },
      },
    },
    tool_choice: { type: ['string', 'object'] },
    response_format: {
      type: 'object',
      required: ['type'],
      properties: { type: { enum: ['text', 'json_object', 'json_schema'] } },
    },
  },
});

export interface CompletionBody {
  model: string;
  prompt: string | unknown[];
  stream?: boolean | null;
  stream_options?: { include_usage?: boolean } | null;
  max_tokens?: number | null;
  n?: number;
  best_of?: number;
  [k: string]: unknown;
}

export const validateCompletion: Validator<CompletionBody> = compileJson<CompletionBody>({
  type: 'object',
  required: ['model', 'prompt'],
  properties: {
    model: { type: 'string', minLength: 1 },
    prompt: { type: ['string', 'array'], minItems: 1, items: { type: ['string', 'integer', 'array'] } },
    ...sampling,
    best_of: { type: ['integer', 'null'], minimum: 1, maximum: 8 },
    echo: { type: ['boolean', 'null'] },
    logprobs: { type: ['integer', 'null'], minimum: 0, maximum: 5 },
    suffix: { type: ['string', 'null'] },
  },
});
