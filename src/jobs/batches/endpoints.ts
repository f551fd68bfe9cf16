import type { Mode } from '../../catalog';
import type { BatchEndpoint } from '../../files';

/** What each batch endpoint runs on: the model modes it takes and the operation its usage records name. */
export const ENDPOINT_MODES: Record<BatchEndpoint, Mode[]> = {
  '/v1/chat/completions': ['chat'],
  '/v1/completions': ['completion'],
  '/v1/embeddings': ['embedding'],
  '/v1/responses': ['chat'],
  '/v1/messages': ['chat'],
};

export const OPERATION_OF: Record<BatchEndpoint, string> = {
  '/v1/chat/completions': 'batch.chat.completions',
  '/v1/completions': 'batch.completions',
  '/v1/embeddings': 'batch.embeddings',
  '/v1/responses': 'batch.responses',
  '/v1/messages': 'batch.messages',
};
