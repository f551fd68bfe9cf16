import type { KindRow } from '../kindRow';
import { AnthropicAdapter } from './adapter';
import { AnthropicBatches } from './batches';
import { anthropicReports } from './reports';

/**
 * `anthropic`: api.anthropic.com's Messages API (adapter.ts: messages, count_tokens); chat, Responses and Gemini
 * requests reach it translated. Message Batches for batches of /v1/messages (batches.ts). No embeddings.
 */
export const anthropicKind: KindRow = {
  adapter: (cfg, opts) => new AnthropicAdapter(cfg, opts),
  chat: 'anthropic',
  streaming: true,
  embeddings: null,
  video: null,
  nativeBatches: { endpoints: (endpoint) => endpoint === '/v1/messages', api: (cfg) => new AnthropicBatches(cfg) },
  reports: anthropicReports,
  telemetryName: 'anthropic',
  litellm: (p) => p === 'anthropic',
  credentials: { source: 'key' },
  owner: () => 'anthropic',
};

export { isClaudeModel } from './models';

export { DEFAULT_ANTHROPIC_VERSION } from './adapter';
