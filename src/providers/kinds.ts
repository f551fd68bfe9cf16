import type { ModelConfig, ProviderConfig } from '../catalog';
import type { KindRow } from './kindRow';
import { wireOf as catalogWireOf, type ChatProtocol, type ProviderKind, type Wire } from '../catalog';
import type { ProviderAdapter } from './types';
import type { NativeBatchApi } from './nativeBatches';
import { openaiKind } from './openai/kind';
import { azureOpenaiKind } from './azure-openai/kind';
import { anthropicKind } from './anthropic/kind';
import { geminiKind } from './gemini/kind';
import { bedrockKind } from './bedrock/kind';
import { vertexKind } from './vertex/kind';
import { veoKind } from './veo/kind';
import { seedanceKind } from './seedance/kind';

/**
 * The one table of provider kinds: what each kind supports, and so how the gateway reaches it. Each row is the
 * `kind.ts` of the kind's own folder (src/providers/<kind>/, an inner folder of this room), which answers "what does
 * it support"; everything outside src/providers/ asks this table (or the adapter it built) and never names a kind.
 * A new kind is its name in src/catalog/kinds.ts, one row here and its folder: docs/architecture.md ("Provider
 * kinds"). The catalog is handed this table when built (`new Catalog(file, KINDS)`).
 */

export type { ChatProtocol, Credentials, ProviderKind, Wire } from '../catalog';
export { PROVIDER_KINDS } from '../catalog';

export type { AdapterOptions, KindRow } from './kindRow';

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
