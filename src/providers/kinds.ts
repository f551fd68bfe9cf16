import { wireOf, type ModelConfig, type ProviderKind } from '../catalog/catalog';

/**
 * The one table of what each provider kind speaks, and so how a chat-family request reaches its models: natively
 * (the body and the answer pass through as the interface sends them) or translated onto chat (src/translate,
 * src/providers/chatBackends.ts). A new kind is one row here.
 */

/** The wire protocol of a kind's chat models; null for kinds that serve no chat (video). */
export type ChatProtocol = 'openai' | 'anthropic' | 'gemini' | null;

export const CHAT_PROTOCOL: Record<ProviderKind, ChatProtocol | 'by model'> = {
  openai: 'openai',
  anthropic: 'anthropic',
  gemini: 'gemini',
  veo: null,
  seedance: null,
  // Cloud kinds host several vendors' models: Claude speaks Anthropic Messages, Gemini the Gemini API, anything
  // else on Bedrock the Converse API (translated only). See wireOf in src/catalog/catalog.ts.
  bedrock: 'by model',
  vertex: 'by model',
  'azure-openai': 'openai',
};

/** The protocol a kind's upstream model speaks for chat (null: no native chat-family path). */
export function chatProtocol(kind: ProviderKind, upstreamModel: string): ChatProtocol {
  const p = CHAT_PROTOCOL[kind];
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
