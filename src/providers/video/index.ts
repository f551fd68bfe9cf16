import type { Catalog } from '../../catalog/catalog';
import { SeedanceAdapter } from '../seedance/adapter';
import type { VideoProviderAdapter } from './types';
import { adapterKey, type Deployment } from '../../catalog/deployments';
import { VeoAdapter } from '../veo/adapter';
import { VertexVeoAdapter } from '../vertex/veo';

/** One adapter per video provider in the catalog, keyed by provider id. */
export class VideoProviders {
  private readonly byId = new Map<string, VideoProviderAdapter>();

  constructor(catalog: Catalog) {
    for (const p of catalog.providers.values()) {
      if (p.kind === 'veo') this.byId.set(p.id, new VeoAdapter(p));
      else if (p.kind === 'seedance') this.byId.set(p.id, new SeedanceAdapter(p));
      else if (p.kind === 'vertex') this.byId.set(p.id, new VertexVeoAdapter(p));
    }
    // A deployment with a key of its own gets its own adapter.
    for (const d of catalog.allDeployments()) {
      const p = catalog.providers.get(d.provider)!;
      if (!d.apiKeyEnv || this.byId.has(adapterKey(d))) continue;
      if (p.kind === 'veo') this.byId.set(adapterKey(d), new VeoAdapter({ ...p, apiKey: d.apiKey }));
      else if (p.kind === 'seedance') this.byId.set(adapterKey(d), new SeedanceAdapter({ ...p, apiKey: d.apiKey }));
    }
  }

  /** The adapter serving a deployment. */
  forDeployment(d: Deployment): VideoProviderAdapter {
    return this.get(adapterKey(d));
  }

  get(providerId: string): VideoProviderAdapter {
    const a = this.byId.get(providerId);
    if (!a) throw new Error(`no video adapter for provider ${providerId}`);
    return a;
  }

  async close(): Promise<void> {
    await Promise.all([...this.byId.values()].map((a) => a.close()));
  }
}
