import { ApiError } from '../errors';
import type { ModelConfig } from '../catalog';
import {
  type ProviderRegistry,
  type OpenAICompatibleAdapter,
  type ProviderAdapter,
  type MessagesUpstream,
  type GeminiUpstream,
  geminiEmbedder,
} from '../providers';
import type { RouteTry } from './modelRouter';

/**
 * Which adapter answers a try: the operations name the kind of upstream they speak (OpenAI-compatible, Anthropic
 * messages, Gemini), the call (RoutedCall.attempt) looks it up for each try's deployment and hands it over. Beside
 * them, the lookups an operation makes on the requested model before anything is reserved (which path serves it;
 * a misconfigured provider refused with nothing held).
 */
export type Upstream<A> = (providers: ProviderRegistry, t: RouteTry) => A;

/** The deployment's OpenAI-compatible adapter (chat, completions, /responses, embeddings). */
export const openaiUpstream: Upstream<OpenAICompatibleAdapter> = (p, t) => p.openaiFor(t.deployment);

/** The deployment's Anthropic messages adapter, else `fallback` (the requested model's). */
export function messagesUpstream(fallback: MessagesUpstream): Upstream<MessagesUpstream> {
  return (p, t) => p.forDeployment(t.deployment)?.messagesFor?.(t.deployment.upstreamModel) ?? fallback;
}

/** The deployment's Gemini adapter (a deployment of another kind is a catalog error: 500). */
export const geminiUpstream: Upstream<GeminiUpstream> = (p, t) => {
  const a = p.forDeployment(t.deployment)?.geminiFor?.(t.deployment.upstreamModel);
  if (!a)
    throw new ApiError(
      500,
      `Model '${t.model.id}' is not served by a Gemini provider.`,
      'server_error',
      null,
      'provider_misconfigured',
    );
  return a;
};

export type GeminiEmbedder = Required<Pick<ProviderAdapter, 'embed'>>;

/** The deployment's embedder: a Gemini provider's embedContent, else its OpenAI-compatible /embeddings. */
export const embeddingsUpstream: Upstream<
  { gemini: GeminiEmbedder } | { gemini: null; openai: OpenAICompatibleAdapter }
> = (p, t) => {
  const gemini = geminiEmbedder(p.forDeployment(t.deployment));
  return gemini ? { gemini } : { gemini, openai: p.openaiFor(t.deployment) };
};

type RegistryDeps = { providers: ProviderRegistry };

/** The requested model's OpenAI-compatible adapter must exist: refused (500) before funds are reserved. */
export function requireOpenAIProvider(deps: RegistryDeps, model: ModelConfig): void {
  deps.providers.openai(model);
}

/** The requested model's Anthropic messages adapter, when its provider speaks messages natively. */
export function messagesUpstreamOf(deps: RegistryDeps, model: ModelConfig): MessagesUpstream | null {
  return deps.providers.get(model.provider)?.messagesFor?.(model.upstreamModel) ?? null;
}

/** The requested model's Gemini adapter, when its provider is a Gemini API. */
export function geminiUpstreamOf(deps: RegistryDeps, model: ModelConfig): GeminiUpstream | null | undefined {
  return deps.providers.get(model.provider)?.geminiFor?.(model.upstreamModel);
}

/** The requested model's Gemini embedder, when its provider embeds the Gemini way. */
export function geminiEmbedderOf(deps: RegistryDeps, model: ModelConfig): GeminiEmbedder | null {
  return geminiEmbedder(deps.providers.get(model.provider));
}
