import type { KindRow } from '../kindRow';
import { OpenAIAdapter } from './adapter';
import { OpenAIBatches } from './batches';
import { openaiReports } from './reports';

/**
 * `openai`: OpenAI and every OpenAI-compatible upstream (vLLM, Ollama, LiteLLM, the emulator). Chat, completions,
 * Responses, embeddings, audio and images over OpenAI's API (adapter.ts); its Files + Batch API for batches of every
 * endpoint but /v1/messages (batches.ts).
 */
export const openaiKind: KindRow = {
  adapter: (cfg, opts) => new OpenAIAdapter(cfg, opts),
  chat: 'openai',
  streaming: true,
  embeddings: 'openai',
  video: null,
  nativeBatches: { endpoints: (endpoint) => endpoint !== '/v1/messages', api: (cfg) => new OpenAIBatches(cfg) },
  reports: openaiReports,
  telemetryName: 'openai',
  litellm: (p) => p === 'openai' || p === 'text-completion-openai',
  credentials: { source: 'key' },
  owner: () => 'openai',
};

export { OpenAIAdapter, mapTransportError, mapUpstreamError, usageFromJson } from './adapter';
export type { OpenAIAdapterOptions } from './adapter';
