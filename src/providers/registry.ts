import { ApiError } from '../errors';
import type { Catalog, ModelConfig } from '../catalog';
import type { OpenAICompatibleAdapter, PerDeploymentAdapter, ProviderAdapter } from './types';
import { adapterKey, type Deployment } from '../catalog';
import { KINDS } from './kinds';
import type { AdapterOptions } from './kindRow';

/**
 * One adapter (and so one connection pool) per catalog provider, built once at start-up and shared by every
 * request, by its kind's row (src/providers/kinds.ts `adapter`). Kinds without one are skipped (video kinds: their
 * adapters are src/providers/videoProviders.ts's).
 */
export class ProviderRegistry {
  private readonly adapters = new Map<string, ProviderAdapter>();

  constructor(catalog: Catalog, opts: AdapterOptions = {}) {
    for (const cfg of catalog.providers.values()) {
      const make = KINDS[cfg.kind].adapter;
      if (make) this.adapters.set(cfg.id, make(cfg, opts));
    }
    // A deployment with a key of its own gets its own adapter (headers and pool), one per provider and key.
    for (const d of catalog.allDeployments()) {
      const key = adapterKey(d);
      if (!d.apiKeyEnv || this.adapters.has(key)) continue;
      const cfg = catalog.providers.get(d.provider)!;
      const make = KINDS[cfg.kind].adapter;
      if (make) this.adapters.set(key, make({ ...cfg, apiKey: d.apiKey }, opts));
    }
  }

  /** The adapter serving a deployment. */
  forDeployment(d: Deployment): ProviderAdapter | undefined {
    return this.adapters.get(d.apiKeyEnv ? adapterKey(d) : d.provider);
  }

  /** The OpenAI-compatible adapter serving a deployment (a catalog misconfiguration is a 500). */
  openaiFor(d: Deployment): OpenAICompatibleAdapter {
    const a = this.forDeployment(d);
    if (a && isPerDeployment(a)) return a.deployment(d.upstreamModel);
    if (!a || KINDS[a.kind].chat !== 'openai') {
      throw new ApiError(
        500,
        `Model '${d.modelId}' is not served by an OpenAI-compatible provider.`,
        'server_error',
        null,
        'provider_misconfigured',
      );
    }
    return a as OpenAICompatibleAdapter;
  }

  get(providerId: string): ProviderAdapter | undefined {
    return this.adapters.get(providerId);
  }

  /** The OpenAI-compatible adapter serving this model (a catalog misconfiguration is a 500, not the client's fault). */
  openai(model: ModelConfig): OpenAICompatibleAdapter {
    const a = this.adapters.get(model.provider);
    if (a && isPerDeployment(a)) return a.deployment(model.upstreamModel);
    if (!a || KINDS[a.kind].chat !== 'openai') {
      throw new ApiError(
        500,
        `Model '${model.id}' is not served by an OpenAI-compatible provider.`,
        'server_error',
        null,
        'provider_misconfigured',
      );
    }
    return a as OpenAICompatibleAdapter;
  }

  async close(): Promise<void> {
    await Promise.all([...this.adapters.values()].map((a) => a.close().catch(() => undefined)));
  }
}

const isPerDeployment = (a: ProviderAdapter): a is PerDeploymentAdapter =>
  typeof (a as Partial<PerDeploymentAdapter>).deployment === 'function';
