/**
 * What the catalog knows of provider kinds: their names, and the facts of a kind's row (src/providers/kinds.ts,
 * `KINDS`) that its validation reads. The rows themselves (adapters, clients, reports) live above, in
 * src/providers/; whoever builds a Catalog hands it the table (`KINDS`), so the catalog imports nothing of theirs.
 */

/** Every provider kind, in the table's order: a catalog provider's `kind` is one of these. */
export const PROVIDER_KINDS = [
  'openai',
  'anthropic',
  'gemini',
  'veo',
  'seedance',
  'bedrock',
  'vertex',
  'azure-openai',
] as const;

/** A provider kind: src/providers/kinds.ts has its row, src/providers/<kind>/ its folder. */
export type ProviderKind = (typeof PROVIDER_KINDS)[number];

/** A protocol a kind's upstream models answer in (its "wire"): what decides which native path serves a model. */
export type Wire = 'openai' | 'anthropic' | 'gemini' | 'converse' | 'veo' | 'seedance';

/** The wire protocol of a kind's chat models; null for kinds that serve no chat (video). */
export type ChatProtocol = 'openai' | 'anthropic' | 'gemini' | null;

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

/** The fields of a kind's row the catalog reads (src/providers/kinds.ts `KindRow` has them all). */
export interface KindFacts {
  /** The chat protocol of its models, or `by model` for clouds that host several vendors' models (see `wireOf`). */
  chat: ChatProtocol | 'by model';
  /** `by model` kinds: the protocol each upstream model answers in (chat and video alike). */
  wireOf?: (upstreamModel: string) => Wire;
  /** Its video protocol, if it serves video. */
  video: { protocol: 'veo' | 'seedance' } | null;
  /** What its catalog entry needs. */
  credentials: Credentials;
  /** The public vendor of an upstream model (`owned_by`), when the catalog names none. */
  owner: (upstreamModel: string) => string;
}

/** The kinds table as the catalog reads it: src/providers/kinds.ts `KINDS`. */
export type KindTable = Record<ProviderKind, KindFacts>;

/**
 * The wire protocol a deployment answers in: Claude on Bedrock and on Vertex speak Anthropic Messages, Gemini on
 * Vertex the Gemini API, Veo on Vertex Veo's long-running operations; deployments of one model (and its fallbacks)
 * may be of any kinds that speak the same one.
 */
export function wireOf(kinds: KindTable, kind: ProviderKind, upstreamModel: string): Wire {
  const row = kinds[kind];
  if (row.wireOf) return row.wireOf(upstreamModel);
  if (row.chat !== null && row.chat !== 'by model') return row.chat;
  return row.video!.protocol;
}
