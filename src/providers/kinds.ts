import type { ModelConfig, ProviderConfig } from '../catalog/catalog';
import type { ProviderAdapter } from './types';
import type { VideoProviderAdapter } from './video/types';
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
 * outside src/providers/ asks this table (or the adapter it built) and never names a kind. A new kind is one row
 * here and its folder: docs/architecture.md ("Provider kinds").
 */

/** A protocol a kind's upstream models answer in (its "wire"): what decides which native path serves a model. */
export type Wire = 'openai' | 'anthropic' | 'gemini' | 'converse' | 'veo' | 'seedance';

/** The wire protocol of a kind's chat models; null for kinds that serve no chat (video). */
export type ChatProtocol = 'openai' | 'anthropic' | 'gemini' | null;

/** What every adapter factory is given by the process (the registry's options). */
export interface AdapterOptions {
  /** Max sockets to the upstream origin (OpenAI-compatible kinds). */
  connections?: number;
  connectTimeoutMs?: number;
  /** Called for every failed upstream call (metrics). */
  onError?: (providerId: string, status: number) => void;
}

/** What a kind's catalog entry must and may carry: read by the catalog's validation (src/catalog/catalog.ts). */
export interface Credentials {
  /**
   * `key`: an API key read from the provider's (or a deployment's) `apiKeyEnv`, and a `baseUrl` is required;
   * `cloud`: the cloud's own credential chain (never an `apiKeyEnv`), a region, and the region's default endpoint.
   */
  source: 'key' | 'cloud';
  /** cloud: the region when the catalog gives none (undefined: the catalog must give one). */
  defaultRegion?: (env: NodeJS.ProcessEnv) => string | undefined;
  /** cloud: the region's endpoint when the catalog gives no baseUrl. */
  defaultBaseUrl?: (region: string) => string;
  /** cloud: the catalog must name a `project`. */
  project?: boolean;
  /** It takes `apiVersion` (Azure's dated api-versions). */
  apiVersion?: boolean;
}

export interface KindRow {
  /** Builds the synchronous adapter (chat family, embeddings, audio, images); null: the kind has none (video). */
  adapter: ((cfg: ProviderConfig, opts: AdapterOptions) => ProviderAdapter) | null;
  /** The chat protocol of its models, or `by model` for clouds that host several vendors' models (see `wire`). */
  chat: ChatProtocol | 'by model';
  /** `by model` kinds: the protocol each upstream model answers in (chat and video alike). */
  wireOf?: (upstreamModel: string) => Wire;
  /** Its chat models stream (SSE relayed or translated as it arrives). */
  streaming: boolean;
  /** How its embedding models are called: OpenAI's /embeddings, Gemini's embedContent (the adapter's `embed`). */
  embeddings: 'openai' | 'gemini' | null;
  /** Its video protocol and the video adapter (src/providers/video/index.ts builds one per provider). */
  video: { protocol: 'veo' | 'seedance'; adapter: (cfg: ProviderConfig) => VideoProviderAdapter } | null;
  /** The provider's own batch API (with `nativeBatches: true` in the catalog): which endpoints it takes. */
  nativeBatches: { endpoints: (endpoint: string) => boolean; api: (cfg: ProviderConfig) => NativeBatchApi } | null;
  /**
   * The provider's own usage and cost reports, read by reconciliation (src/jobs/reconcile/reconcile.ts); a string: the
   * gateway reads none yet, and this names the report they would be read from (docs/billing.md).
   */
  reports: UsageReports | string;
  /** What its catalog entry needs. */
  credentials: Credentials;
  /** Its `gen_ai.provider.name` on the spans of upstream tries (src/observability/tracingSdk.ts). */
  telemetryName: string;
  /** Whether a LiteLLM price list's `litellm_provider` names models it serves (src/cli/catalogImport.ts). */
  litellm: (litellmProvider: string) => boolean;
  /** The public vendor of an upstream model (`owned_by`), when the catalog names none. */
  owner: (upstreamModel: string) => string;
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
} satisfies Record<string, KindRow>;

/** A provider kind: a key of the table. */
export type ProviderKind = keyof typeof KINDS;

/** Every kind, in the table's order. */
export const PROVIDER_KINDS = Object.keys(KINDS) as ProviderKind[];

/**
 * The wire protocol a deployment answers in: Claude on Bedrock and on Vertex speak Anthropic Messages, Gemini on
 * Vertex the Gemini API, Veo on Vertex Veo's long-running operations; deployments of one model (and its fallbacks)
 * may be of any kinds that speak the same one.
 */
export function wireOf(kind: ProviderKind, upstreamModel: string): Wire {
  const row: KindRow = KINDS[kind];
  if (row.wireOf) return row.wireOf(upstreamModel);
  if (row.chat !== null && row.chat !== 'by model') return row.chat;
  return row.video!.protocol;
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
