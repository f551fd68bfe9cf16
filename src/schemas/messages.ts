import { compileJson, type Validator } from './compile';
import type { MessagesRequest } from '../translate';
import { tokenCount } from './tokens';

/**
 * POST /v1/messages and POST /v1/messages/count_tokens (Anthropic Messages). Only what the gateway
 * relies on is checked; every other field (context_management, output_config, container, service_tier, block
 * cache_control, tool defer_loading, ...) is accepted and forwarded to an Anthropic upstream or stripped when
 * translating. Roles include `system`: Claude Code sends a trailing system entry for models it does not know.
 */

/** A block of `type` whose fields are checked by `then`. */
const ofType = (type: string, then: object) => ({
  if: { properties: { type: { const: type } }, required: ['type'] },
  then,
});
// A text block's text is a string: anything else broke the token count (an object with its own toString was a
// 500) or went upstream as sent.
const textBlock = ofType('text', { required: ['text'], properties: { text: { type: 'string' } } });
const leafBlock = { type: 'object', required: ['type'], properties: { type: { type: 'string' } }, allOf: [textBlock] };
// A tool result's content: a string or blocks, its text blocks held to the same rule.
const block = {
  ...leafBlock,
  allOf: [
    textBlock,
    ofType('tool_result', { properties: { content: { type: ['string', 'array'], items: leafBlock } } }),
  ],
};
const message = {
  type: 'object',
  required: ['role', 'content'],
  properties: {
    role: { enum: ['user', 'assistant', 'system'] },
    content: { type: ['string', 'array'], items: block },
  },
};
const common = {
  model: { type: 'string', minLength: 1 },
  messages: { type: 'array', minItems: 1, items: message },
  system: { type: ['string', 'array'], items: block },
  tools: {
    type: 'array',
    items: {
      type: 'object',
      required: ['name'],
      properties: {
        name: { type: 'string', minLength: 1 },
        type: { type: 'string' },
        description: { type: 'string' },
        input_schema: { type: 'object' },
      },
    },
  },
  tool_choice: {
    type: 'object',
    required: ['type'],
    properties: {
      type: { enum: ['auto', 'any', 'none', 'tool'] },
      name: { type: 'string' },
      disable_parallel_tool_use: { type: 'boolean' },
    },
  },
  thinking: {
    type: 'object',
    required: ['type'],
    properties: { type: { enum: ['enabled', 'disabled', 'adaptive'] }, budget_tokens: tokenCount },
  },
};

export const validateMessages: Validator<MessagesRequest> = compileJson<MessagesRequest>({
  type: 'object',
  required: ['model', 'max_tokens', 'messages'],
  properties: {
    ...common,
    max_tokens: tokenCount,
    stream: { type: 'boolean' },
    temperature: { type: 'number', minimum: 0, maximum: 1 },
    top_p: { type: 'number', minimum: 0, maximum: 1 },
    top_k: { type: 'integer', minimum: 0 },
    stop_sequences: { type: 'array', items: { type: 'string' } },
    metadata: { type: 'object', properties: { user_id: { type: ['string', 'null'] } } },
  },
});

export type CountTokensRequest = Pick<
  MessagesRequest,
  'model' | 'messages' | 'system' | 'tools' | 'tool_choice' | 'thinking'
> &
  Record<string, unknown>;
export const validateCountTokens: Validator<CountTokensRequest> = compileJson<CountTokensRequest>({
  type: 'object',
  required: ['model', 'messages'],
  properties: common,
});
