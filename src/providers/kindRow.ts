import type { ProviderConfig, KindFacts } from '../catalog';
import type { ProviderAdapter } from './types';
import type { VideoProviderAdapter } from './video/types';
import type { NativeBatchApi } from './nativeBatches';
import type { UsageReports } from './usageReports';

/*
 * The shape of a kind's row (src/providers/kinds.ts, `KINDS`), apart from the table: each kind's folder types its row
 * with it, and the table imports the folders.
 */

/** What every adapter factory is given by the process (the registry's options). */
export interface AdapterOptions {
  /** Max sockets to the upstream origin (OpenAI-compatible kinds). */
  connections?: number;
  connectTimeoutMs?: number;
  /** Called for every failed upstream call (metrics). */
  onError?: (providerId: string, status: number) => void;
}

/** A kind's row; the fields the catalog reads too are KindFacts' (src/catalog/kinds.ts). */
export interface KindRow extends KindFacts {
  /** Builds the synchronous adapter (chat family, embeddings, audio, images); null: the kind has none (video). */
  adapter: ((cfg: ProviderConfig, opts: AdapterOptions) => ProviderAdapter) | null;
  /** Its chat models stream (SSE relayed or translated as it arrives). */
  streaming: boolean;
  /** How its embedding models are called: OpenAI's /embeddings, Gemini's embedContent (the adapter's `embed`). */
  embeddings: 'openai' | 'gemini' | null;
  /** Its video protocol and the video adapter (src/providers/videoProviders.ts builds one per provider). */
  video: { protocol: 'veo' | 'seedance'; adapter: (cfg: ProviderConfig) => VideoProviderAdapter } | null;
  /** The provider's own batch API (with `nativeBatches: true` in the catalog): which endpoints it takes. */
  nativeBatches: { endpoints: (endpoint: string) => boolean; api: (cfg: ProviderConfig) => NativeBatchApi } | null;
  /**
   * The provider's own usage and cost reports, read by reconciliation (src/jobs/reconcile/reconcile.ts); a string: the
   * gateway reads none yet, and this names the report they would be read from (docs/billing.md).
   */
  reports: UsageReports | string;
  /** Its `gen_ai.provider.name` on the spans of upstream tries (src/observability/tracingSdk.ts). */
  telemetryName: string;
  /** Whether a LiteLLM price list's `litellm_provider` names models it serves (src/cli/catalogImport.ts). */
  litellm: (litellmProvider: string) => boolean;
}
