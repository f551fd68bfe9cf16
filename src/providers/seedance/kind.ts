import type { KindRow } from '../kindRow';
import { seedanceReports } from './reports';
import { SeedanceAdapter } from './adapter';

/** `seedance`: BytePlus ModelArk's Seedance video tasks (adapter.ts). Video only. */
export const seedanceKind: KindRow = {
  adapter: null,
  chat: null,
  streaming: false,
  embeddings: null,
  video: { protocol: 'seedance', adapter: (cfg) => new SeedanceAdapter(cfg) },
  nativeBatches: null,
  reports: seedanceReports,
  telemetryName: 'byteplus',
  litellm: () => false,
  credentials: { source: 'key' },
  owner: () => 'bytedance',
};
