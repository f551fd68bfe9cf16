import type { ModelConfig, ProviderConfig } from '../catalog';
import { wireOf as catalogWireOf, type ChatProtocol, type KindFacts, type ProviderKind, type Wire } from '../catalog';
import type { ProviderAdapter } from './types';
import type { VideoProviderAdapter } from './video';
import type { NativeBatchApi } from './nativeBatches';
import type { UsageReports } from './usageReports';
import { openaiKind } from './openai';
import { azureOpenaiKind } from './azure-openai';
import { anthropicKind } from './anthropic';
import { geminiKind } from './gemini';
import { bedrockKind } from './bedrock';
import { vertexKind } from './vertex';
import { veoKind } from './veo';
import { seedanceKind } from './seedance';

/**
 * The one table of provider kinds: what each kind supports, and so how the gateway reaches it. Each row is the
 * `index.ts` of the kind's own folder (src/providers/<kind>/), which answers "what does it support"; everything
 * outside src/providers/ asks this table (or the adapter it built) and never names a kind. A new kind is its name in
 * src/catalog/kinds.ts, one row here and its folder: docs/architecture.md ("Provider kinds"). The catalog is handed
 * this table when built (`new Catalog(file, KINDS)`).
 */

export type { ChatProtocol, Credentials, ProviderKind, Wire } from '../catalog';
export { PROVIDER_KINDS } from '../catalog';

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
  /** Its video protocol and the video adapter (src/providers/video/index.ts builds one per provider). */
  video: { protocol: 'veo' | 'seedance'; adapter: (cfg: ProviderConfig) => VideoProviderAdapter } | null;
  /** The provider's own batch API (with `nativeBatches: true` in the catalog): which endpoints it takes. */
  nativeBatches: { endpoints: (endpoint: string) => boolean; api: (cfg: ProviderConfig) => NativeBatchApi } | null;
  /**
   * The provider's own usage and cost reports, read by reconciliation (src/reconcile/reconcile.ts); a string: the
   * gateway reads none yet, and this names the report they would be read from (docs/billing.md).
   */
  reports: UsageReports | string;
  /** Its `gen_ai.provider.name` on the spans of upstream tries (src/observability/tracingSdk.ts). */
  telemetryName: string;
  /** Whether a LiteLLM price list's `litellm_provider` names models it serves (src/cli/catalogImport.ts). */
  litellm: (litellmProvider: string) => boolean;
}

export const KINDS = {
  openai: openaiKind,
  anthropic: anthropicKind,
  gemini: geminiKind,
  veo: veoKind,
  seedance: seedanceKind,
  bedrock: bedrockKind,
  vertex: vertexKind,
  'azure-openai': azureOpenaiKind,
} satisfies Record<ProviderKind, KindRow>;

/** The wire protocol a deployment answers in (src/catalog/kinds.ts `wireOf`, on this table). */
export function wireOf(kind: ProviderKind, upstreamModel: string): Wire {
  return catalogWireOf(KINDS, kind, upstreamModel);
}

/** The protocol a kind's upstream model speaks for chat (null: no native chat-family path). */
export function chatProtocol(kind: ProviderKind, upstreamModel: string): ChatProtocol {
  const p = KINDS[kind].chat;
  if (p !== 'by model') return p;
  const wire = wireOf(kind, upstreamModel);
  return wire === 'anthropic' || wire === 'gemini' ? wire : null;
}

/** The client-facing interfaces of the chat family. */
export type ChatSurface = 'chat' | 'responses' | 'messages' | 'gemini';

/**
 * Whether a request on `surface` for `model` (whose provider is of `kind`) passes through natively. Chat and
 * Responses are native on an OpenAI-compatible upstream, chosen by the model's `api` (a Responses-only model takes
 * /v1/chat/completions through the chat <-> Responses bridge, and a chat model takes /v1/responses translated).
 */
export function servedNatively(
  kind: ProviderKind,
  model: Pick<ModelConfig, 'api' | 'upstreamModel'>,
  surface: ChatSurface,
): boolean {
  const protocol = chatProtocol(kind, model.upstreamModel);
  switch (surface) {
    case 'chat':
      return protocol === 'openai' && model.api !== 'responses';
    case 'responses':
      return protocol === 'openai' && model.api === 'responses';
    case 'messages':
      return protocol === 'anthropic';
    case 'gemini':
      return protocol === 'gemini';
  }
}

/** The adapter, when its kind embeds over the Gemini API (its `embed`); null: OpenAI's /embeddings. */
export function geminiEmbedder(a: ProviderAdapter | undefined): Required<Pick<ProviderAdapter, 'embed'>> | null {
  return a?.embed && KINDS[a.kind].embeddings === 'gemini' ? (a as Required<Pick<ProviderAdapter, 'embed'>>) : null;
}

/** Whether a batch of `endpoint` on a model of this provider runs on the provider's own batch API. */
export function nativeBatchesFor(p: ProviderConfig, endpoint: string): boolean {
  const native: KindRow['nativeBatches'] = KINDS[p.kind].nativeBatches;
  return !!p.nativeBatches && !!native && native.endpoints(endpoint);
}

/** The provider's own batch API (nativeBatchesFor said it runs there). */
export function nativeBatchApi(p: ProviderConfig): NativeBatchApi {
  const native: KindRow['nativeBatches'] = KINDS[p.kind].nativeBatches;
  if (!native) throw new Error(`provider ${p.id} (${p.kind}) has no native batch API`);
  return native.api(p);
}
