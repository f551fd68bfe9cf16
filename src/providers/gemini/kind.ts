import type { KindRow } from '../kindRow';
import { GeminiAdapter } from './adapter';

/**
 * `gemini`: the Gemini API (generativelanguage.googleapis.com): generateContent and its stream, countTokens, and
 * embeddings through embedContent / batchEmbedContents (adapter.ts `embed`). No native batches.
 */
export const geminiKind: KindRow = {
  adapter: (cfg, opts) => new GeminiAdapter(cfg, opts),
  chat: 'gemini',
  streaming: true,
  embeddings: 'gemini',
  video: null,
  nativeBatches: null,
  reports: 'Cloud Billing export to BigQuery (per SKU)',
  telemetryName: 'gcp.gemini',
  litellm: (p) => p === 'gemini',
  credentials: { source: 'key' },
  owner: () => 'google',
};

export type { GeminiEmbedRequest, GeminiResponse, GeminiUpstream } from './adapter';
