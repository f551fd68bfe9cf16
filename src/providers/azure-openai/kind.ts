import type { KindRow } from '../kindRow';
import { AzureOpenAIAdapter } from './adapter';

/**
 * `azure-openai`: OpenAI's protocol at Azure's URLs (the /openai/v1 URLs, or a dated `apiVersion`'s per-deployment
 * URLs), with an api-key or Entra ID credentials (auth.ts). No native batches through the gateway.
 */
export const azureOpenaiKind: KindRow = {
  adapter: (cfg, opts) => new AzureOpenAIAdapter(cfg, opts),
  chat: 'openai',
  streaming: true,
  embeddings: 'openai',
  video: null,
  nativeBatches: null,
  reports: 'Azure Cost Management query API (per meter, per day)',
  telemetryName: 'azure-openai',
  litellm: (p) => p === 'azure' || p === 'azure_text',
  credentials: { source: 'key', apiVersion: true },
  owner: () => 'openai',
};
