import type { Catalog, ModelConfig } from '../catalog';
import type { ChatRequest } from '../translate';
import { backendFor } from '../providers';
import type { ChatBackend, ProviderRegistry } from '../providers';
import type { ModelRouter, RouteTry } from './modelRouter';
import type { Estimate } from './estimate';
import { tokensFromChars } from '../billing';

/**
 * The chat backends (src/providers/chatBackends.ts) of every deployment that may answer a translated request: the
 * primary deployment's built at once (nearly every request ends there), the others on first use, so the translated
 * and bridged paths of /v1/messages, /v1/responses, Gemini and chat on Claude retry and fall back like the others
 * (the tries are the request's RoutedCall's, src/modelCall/routedCall.ts). Its bound covers every candidate.
 */
export class RoutedBackend {
  readonly payloadBytes: number;
  readonly maxCost: number;
  readonly maxTokens: number;
  private readonly primary: ChatBackend;
  private readonly others = new Map<string, ChatBackend>();

  private readonly providers: ProviderRegistry;

  constructor(
    deps: { providers: ProviderRegistry; catalog: Catalog; router: ModelRouter },
    private readonly model: ModelConfig,
    private readonly chat: ChatRequest,
  ) {
    const { providers, catalog, router } = deps;
    this.providers = providers;
    this.primary = backendFor(providers, model, chat);
    let bound: ChatBackend = this.primary;
    const candidates = router.candidates(model);
    if (candidates.length > 1 || catalog.deployments(model).length > 1) {
      for (const m of candidates) {
        for (const d of catalog.deployments(m)) {
          const b = this.backendOf(m, d);
          if (b.maxCost > bound.maxCost) bound = b;
        }
      }
    }
    this.payloadBytes = this.primary.payloadBytes;
    this.maxCost = bound.maxCost;
    this.maxTokens = bound.maxTokens;
  }

  /** What the call may cost at most, over every candidate (the call opens with it: openCall). */
  get estimate(): Required<Estimate> {
    return { maxCost: this.maxCost, maxTokens: this.maxTokens };
  }

  /** The primary payload's input tokens by the delivered-text rule (what a translated stream reports at its start). */
  get inputTokensEstimate(): number {
    return tokensFromChars(this.payloadBytes);
  }

  /** The backend of one try's deployment. */
  forTry(t: RouteTry): ChatBackend {
    return this.backendOf(t.model, t.deployment);
  }

  private backendOf(m: ModelConfig, d: RouteTry['deployment']): ChatBackend {
    if (m === this.model && d.provider === m.provider && d.upstreamModel === m.upstreamModel && !d.apiKeyEnv)
      return this.primary;
    let b = this.others.get(d.id);
    if (!b)
      this.others.set(
        d.id,
        (b = backendFor(this.providers, m, m === this.model ? this.chat : { ...this.chat, model: d.upstreamModel }, d)),
      );
    return b;
  }
}
