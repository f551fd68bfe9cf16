import type { KindRow } from '../kindRow';
import { veoReports } from './reports';
import { VeoAdapter } from './adapter';

/** `veo`: Google Veo through the Gemini API's long-running operations (adapter.ts). Video only. */
export const veoKind: KindRow = {
  adapter: null,
  chat: null,
  streaming: false,
  embeddings: null,
  video: { protocol: 'veo', adapter: (cfg) => new VeoAdapter(cfg) },
  nativeBatches: null,
  reports: veoReports,
  telemetryName: 'gcp.vertex_ai',
  litellm: () => false,
  credentials: { source: 'key' },
  owner: () => 'google',
};

export { VeoAdapter } from './adapter';
