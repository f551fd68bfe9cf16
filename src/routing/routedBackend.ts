import type { Catalog, ModelConfig } from '../catalog/catalog';
import type { ChatChunk, ChatCompletion, ChatRequest } from '../translate/chatTypes';
import { backendFor, type ChatBackend } from '../providers/chatBackends';
import type { ProviderRegistry } from '../providers/registry';
import type { ModelRouter, RouteRecorder, RouteTry } from './modelRouter';

/**
 * A chat backend (src/providers/chatBackends.ts) whose calls go through the router: each try is the backend of
 * its deployment (built on first use; the primary deployment's at once, since nearly every request ends there), so the
 * translated and bridged paths of /v1/messages, /v1/responses and chat on Claude retry and fall back like the
 * others. complete() and stream() resolve once an upstream answered 2xx: a stream's failure after that is the
 * caller's to end, never retried. Its bound covers every candidate; `answered` is the model whose prices bill it.
 */
export class RoutedBackend implements ChatBackend {
  readonly payloadBytes: number;
  readonly maxCost: number;
  readonly maxTokens: number;
  /** The model of the try that answered (a fallback's differs from the requested one). */
  answered: ModelConfig;
  /** Told of each try (the meter, once reserved). */
  recorder: RouteRecorder | null = null;
  private readonly primary: ChatBackend;
  private readonly others = new Map<string, ChatBackend>();

  constructor(
    private readonly providers: ProviderRegistry,
    catalog: Catalog,
    private readonly router: ModelRouter,
    private readonly model: ModelConfig,
    private readonly chat: ChatRequest,
  ) {
    this.answered = model;
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

  complete(signal: AbortSignal): Promise<ChatCompletion> {
    return this.router.run(this.model, (t) => this.on(t).complete(signal), this.recorder);
  }

  async stream(signal: AbortSignal): Promise<AsyncIterable<ChatChunk[]>> {
    let started!: RouteTry;
    const batches = await this.router.run(
      this.model,
      (t) => {
        started = t;
        return this.on(t).stream(signal);
      },
      this.recorder,
    );
    const router = this.router;
    // A stream the upstream breaks off after its first byte is not retried (the client has it) but cools its
    // deployment.
    return (async function* () {
      try {
        yield* batches;
      } catch (e) {
        if (!signal.aborted) router.streamCut(started);
        throw e;
      }
    })();
  }

  private on(t: RouteTry): ChatBackend {
    this.answered = t.model;
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
