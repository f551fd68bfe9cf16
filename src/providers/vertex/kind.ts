import type { KindRow } from '../kindRow';
import { isClaudeModel } from '../anthropic/models';
import { VertexAdapter } from './adapter';
import { VertexVeoAdapter } from './veo';

/**
 * `vertex`: Google Cloud's Vertex AI (auth.ts: application-default credentials or a key file). Claude models speak
 * Anthropic Messages (rawPredict), Gemini models the Gemini API (adapter.ts), Veo models Veo's long-running
 * operations (veo.ts).
 */
export const vertexKind: KindRow = {
  adapter: (cfg, opts) => new VertexAdapter(cfg, opts),
  chat: 'by model',
  wireOf: (upstreamModel) =>
    isClaudeModel(upstreamModel) ? 'anthropic' : /^veo-/.test(upstreamModel) ? 'veo' : 'gemini',
  streaming: true,
  embeddings: null,
  video: { protocol: 'veo', adapter: (cfg) => new VertexVeoAdapter(cfg) },
  nativeBatches: null,
  reports: 'Cloud Billing export to BigQuery (per SKU)',
  telemetryName: 'vertex',
  litellm: (p) => p.startsWith('vertex_ai'),
  credentials: {
    source: 'cloud',
    defaultRegion: () => 'global',
    defaultBaseUrl: (region) =>
      region === 'global' ? 'https://aiplatform.googleapis.com' : `https://${region}-aiplatform.googleapis.com`,
    project: true,
  },
  owner: (upstreamModel) => (isClaudeModel(upstreamModel) ? 'anthropic' : 'google'),
};
