import { compileJson, type Validator } from './compile';
import type { ResponsesRequest } from '../translate';
import { nullableTokenCount } from './tokens';

/**
 * POST /v1/responses (OpenAI Responses). Only what the gateway relies on is checked; everything else
 * Codex and the SDKs send (include, prompt_cache_key, client_metadata, reasoning, text, truncation, ...) is
 * accepted and forwarded to a Responses upstream, or mapped / stripped when translating to chat.
 */

const item = { type: 'object' };
export const validateResponses: Validator<ResponsesRequest> = compileJson<ResponsesRequest>({
  type: 'object',
  required: ['model', 'input'],
  properties: {
    model: { type: 'string', minLength: 1 },
    input: { type: ['string', 'array'], items: item },
    instructions: { type: ['string', 'null'] },
    tools: {
      type: 'array',
      items: { type: 'object', required: ['type'], properties: { type: { type: 'string' }, name: { type: 'string' } } },
    },
    tool_choice: { type: ['string', 'object'] },
    parallel_tool_calls: { type: ['boolean', 'null'] },
    max_output_tokens: nullableTokenCount,
    temperature: { type: ['number', 'null'], minimum: 0, maximum: 2 },
    top_p: { type: ['number', 'null'], minimum: 0, maximum: 1 },
    stream: { type: ['boolean', 'null'] },
    store: { type: ['boolean', 'null'] },
    previous_response_id: { type: ['string', 'null'] },
    include: { type: ['array', 'null'], items: { type: 'string' } },
    metadata: { type: ['object', 'null'] },
    reasoning: { type: ['object', 'null'] },
    text: { type: ['object', 'null'] },
    user: { type: 'string' },
  },
});
