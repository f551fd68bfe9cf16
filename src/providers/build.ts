import type { Catalog } from '../catalog/catalog';
import { ProviderRegistry } from './registry';
import { AnthropicAdapter } from './anthropic';
import { GeminiAdapter } from './gemini';
import { BedrockAdapter } from './bedrock';
import { VertexAdapter } from './vertex';

/**
 * The synchronous provider adapters of every process (the API's routes and the worker's batch items), built from
 * one list so a kind served on one path is served on the other. `openai` and `azure-openai` are built in to the
 * registry; video kinds have their own clients (providers/video).
 */
export function buildProviderRegistry(
  catalog: Catalog,
  opts: {
    onError?: (provider: string, status: number) => void;
    /** Max sockets to each upstream origin (default 256): the background runs' worker holds one per open stream. */
    connections?: number;
  } = {},
): ProviderRegistry {
  const { onError, connections } = opts;
  const o = { onError, ...(connections ? { connections } : {}) };
  return new ProviderRegistry(catalog, {
    ...o,
    factories: {
      anthropic: (cfg) => new AnthropicAdapter(cfg, o),
      gemini: (cfg) => new GeminiAdapter(cfg, o),
      bedrock: (cfg) => new BedrockAdapter(cfg, o),
      vertex: (cfg) => new VertexAdapter(cfg, o),
    },
  });
}
