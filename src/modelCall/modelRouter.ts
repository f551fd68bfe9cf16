import type { Catalog, ModelConfig, Deployment } from '../catalog';
import { DeploymentState, pickHealthy } from './deploymentState';
import { pickByAffinity } from './affinity';
import { failureOf, isRetryable, KINDS } from '../providers';
import type { RoutingSettings } from './settings';
import type { Span } from '@opentelemetry/api';
import { tracer, type TryInfo } from '../observability';

/** How a try came about: the first one, another deployment of the same model, or a fallback model. */
export type TryKind = 'first' | 'retry' | 'fallback';

/** One upstream try: the model and deployment that serve it. */
export interface RouteTry {
  model: ModelConfig;
  deployment: Deployment;
  kind: TryKind;
  state: DeploymentState;
}

/**
 * Told which deployment each try goes to (the request's meter, so its usage record names the one that answered);
 * its `operation` names the tries' spans while tracing is on.
 */
export interface RouteRecorder {
  /** Each try as the router makes it, with its span (null unless the request is traced and sampled). */
  routed(t: RouteTry, span: Span | null): void;
  readonly operation?: string;
  /** The request's span while it is sampled: each try's span is its child (none is made without it). */
  readonly traceSpan?: Span | null;
  /**
   * Takes the span of the try that answered, to end it itself (a stream read after the call returns): true when
   * it did. Without it the try's span ends as its call returns.
   */
  holdTry?(span: Span, t: RouteTry): boolean;
  /** The request's prompt-cache handle (./affinity.ts): it goes to the same healthy deployment as its handle's. */
  readonly affinity?: string | null;
}

interface Link {
  model: ModelConfig;
  states: DeploymentState[];
}

/**
 * Routes a request over a model's deployments and its fallback models. The caller's `call` makes one upstream try
 * and must throw only before the client has received anything (a failure after the first byte is the caller's
 * to end; it reports it with streamCut). A failed try whose class allows it (connect, timeout, 408, 409, 429, 5xx)
 * is followed by another deployment of the same model, then by the fallbacks in order, within maxAttempts tries and
 * maxTimeMs; the client gets the last error when none is left.
 *
 * When every candidate is cooling down, the one that recovers first is tried anyway: a model with a single
 * deployment is always served, and a failure only steers traffic to alternatives where there are some.
 */
export class ModelRouter {
  private readonly chains = new Map<string, Link[]>();
  /** Each deployment's first try of its own model, built once here: the healthy path allocates no try per request. */
  private readonly firstTries = new Map<DeploymentState, RouteTry>();
  readonly states: DeploymentState[] = [];
  /** Provider id -> its kind's name on the tries' spans (src/providers/kinds.ts `telemetryName`). */
  private readonly providerNames = new Map<string, string>();

  constructor(
    catalog: Catalog,
    private readonly settings: RoutingSettings,
    private readonly now: () => number = Date.now,
  ) {
    for (const [id, p] of catalog.providers) this.providerNames.set(id, KINDS[p.kind].telemetryName);
    const byModel = new Map<string, DeploymentState[]>();
    for (const m of catalog.models) {
      const states = catalog.deployments(m).map((d) => new DeploymentState(d));
      byModel.set(m.id, states);
      this.states.push(...states);
    }
    for (const m of catalog.models) {
      const chain: Link[] = [m, ...(m.fallbacks ?? []).map((id) => catalog.get(id)!)].map((x) => ({
        model: x,
        states: byModel.get(x.id)!,
      }));
      this.chains.set(m.id, chain);
      for (const s of chain[0].states)
        this.firstTries.set(s, { model: m, deployment: s.deployment, kind: 'first', state: s });
    }
  }

  /** The models a request on `m` may be answered by, in order (m first): its reservation must cover each. */
  candidates(m: ModelConfig): ModelConfig[] {
    const chain = this.chains.get(m.id)!;
    return chain.length === 1 ? [m] : chain.map((l) => l.model);
  }

  /** `sameModel`: only the model's own deployments, no fallbacks (video: another model has other rules and prices). */
  async run<T>(
    m: ModelConfig,
    call: (t: RouteTry) => Promise<T>,
    recorder?: RouteRecorder | null,
    sameModel = false,
  ): Promise<T> {
    const all = this.chains.get(m.id)!;
    const chain = sameModel && all.length > 1 ? all.slice(0, 1) : all;
    // The router's own instance of the model: a caller may hold another catalog's (the worker of npm start).
    const primary = all[0].model;
    const start = this.now();
    let tried: Set<DeploymentState> | null = null;
    let tries = 0;
    let t = this.choose(chain, null, start, primary, true, recorder)!;
    const parent = tracer ? recorder?.traceSpan : null;
    for (;;) {
      const st = t.state;
      st.requests++;
      if (t.kind === 'retry') st.retries++;
      else if (t.kind === 'fallback') st.fallbacks++;
      // An unsampled request builds no try span (nor its attributes); the call gets the span from the recorder.
      const span = parent && tracer ? tracer.startTry(this.tryInfo(t, recorder), parent) : null;
      recorder?.routed(t, span);
      const probe = st.begin(this.now());
      const epoch = st.cooldowns;
      try {
        const out = await call(t);
        st.succeeded(epoch, probe);
        if (span && !recorder?.holdTry?.(span, t)) tracer?.endTry(span, t.deployment.upstreamModel, null, null);
        return out;
      } catch (e) {
        const f = failureOf(e);
        if (span) tracer?.endTry(span, t.deployment.upstreamModel, e, f?.cls ?? null);
        if (!f) {
          st.abandoned(probe);
          throw e;
        }
        const now = this.now();
        st.failed(f.cls, f.retryAfterMs, now, this.settings, epoch, probe);
        tries++;
        if (!isRetryable(f.cls) || tries >= this.settings.maxAttempts || now - start >= this.settings.maxTimeMs)
          throw e;
        (tried ??= new Set()).add(st);
        const next = this.choose(chain, tried, now, primary, false, recorder);
        if (!next) throw e;
        t = next;
      }
    }
  }

  private tryInfo(t: RouteTry, recorder: RouteRecorder | null | undefined): TryInfo {
    const d = t.deployment;
    return {
      operation: recorder?.operation,
      model: t.model.id,
      deployment: d.id,
      provider: d.provider,
      providerName: this.providerNames.get(d.provider),
      upstreamModel: d.upstreamModel,
      kind: t.kind,
    };
  }

  /** The model's deployment of that id, if it is one (a job keeps the id of the deployment that accepted it). */
  deployment(m: ModelConfig, id: string | null): RouteTry['deployment'] | null {
    if (id === null) return null;
    return this.chains.get(m.id)?.[0].states.find((s) => s.deployment.id === id)?.deployment ?? null;
  }

  /** A stream that failed after its first byte: not retried (the client has it), but the deployment cools down. */
  streamCut(t: RouteTry): void {
    t.state.failed('stream_cut', null, this.now(), this.settings);
  }

  /** A healthy untried deployment, the primary model's first, then each fallback's; else the last resort. */
  private choose(
    chain: Link[],
    tried: Set<DeploymentState> | null,
    now: number,
    primary: ModelConfig,
    first: boolean,
    recorder?: RouteRecorder | null,
  ): RouteTry | null {
    for (const link of chain) {
      // The handle is read only where there is a choice to make (a single deployment needs none).
      const affinity =
        link.states.length > 1 && this.settings.promptAffinity !== false ? (recorder?.affinity ?? null) : null;
      const s = affinity ? pickByAffinity(link.states, tried, now, affinity) : pickHealthy(link.states, tried, now);
      if (s) return (first && link.model === primary && this.firstTries.get(s)) || tryOf(link, s, primary, first);
    }
    // Every untried candidate is cooling down (or being probed): the one that recovers first.
    let best: { link: Link; s: DeploymentState } | null = null;
    for (const link of chain)
      for (const s of link.states) if (!tried?.has(s) && (!best || s.until < best.s.until)) best = { link, s };
    return best ? tryOf(best.link, best.s, primary, first) : null;
  }
}

function tryOf(link: Link, s: DeploymentState, primary: ModelConfig, first: boolean): RouteTry {
  const kind: TryKind = link.model !== primary ? 'fallback' : first ? 'first' : 'retry';
  return { model: link.model, deployment: s.deployment, kind, state: s };
}
