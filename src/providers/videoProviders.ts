import type { Catalog } from '../catalog';
import { adapterKey, type Deployment } from '../catalog';
import { KINDS } from './kinds';
import type { VideoProviderAdapter } from './video/types';

/** One adapter per video provider in the catalog (its kind's row says which: `video`), keyed by provider id. */
export class VideoProviders {
  private readonly byId = new Map<string, VideoProviderAdapter>();

  constructor(catalog: Catalog) {
    for (const p of catalog.providers.values()) {
      const video = KINDS[p.kind].video;
      if (video) this.byId.set(p.id, video.adapter(p));
    }
    // A deployment with a key of its own gets its own adapter (cloud kinds take no key: the catalog refuses one).
    for (const d of catalog.allDeployments()) {
      const p = catalog.providers.get(d.provider)!;
      if (!d.apiKeyEnv || this.byId.has(adapterKey(d))) continue;
      const video = KINDS[p.kind].video;
      if (video) this.byId.set(adapterKey(d), video.adapter({ ...p, apiKey: d.apiKey }));
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
