import type { Catalog } from '../catalog/catalog';
import { ProviderRegistry } from './registry';
import { AnthropicAdapter } from './anthropic/adapter';
import { GeminiAdapter } from './gemini/adapter';
import { BedrockAdapter } from './bedrock/adapter';
import { VertexAdapter } from './vertex/adapter';

/**
 * The synchronous provider adapters of every process (the API's routes and the worker's batch items), built from
 * one list so a kind served on one path is served on the other. `openai` and `azure-openai` are built in to the
 * registry; video kinds have their own clients (providers/video).
 */
export function buildProviderRegistry(
  catalog: Catalog,
  opts: { onError?: (provider: string, status: number) => void } = {},
): ProviderRegistry {
  const { onError } = opts;
  return new ProviderRegistry(catalog, {
    onError,
    factories: {
      anthropic: (cfg) => new AnthropicAdapter(cfg, { onError }),
      gemini: (cfg) => new GeminiAdapter(cfg, { onError }),
      bedrock: (cfg) => new BedrockAdapter(cfg, { onError }),
      vertex: (cfg) => new VertexAdapter(cfg, { onError }),
    },
  });
}
