import type { IncomingHttpHeaders } from 'node:http';
import type { Span } from '@opentelemetry/api';

/**
 * OpenTelemetry tracing, configured only by the standard environment variables (OTEL_EXPORTER_OTLP_ENDPOINT,
 * OTEL_EXPORTER_OTLP_PROTOCOL, OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER[_ARG], OTEL_RESOURCE_ATTRIBUTES, ...).
 * Without an OTLP endpoint tracing is off and nothing of the SDK is loaded: `tracer` stays null, and every hook in
 * the request path is one null check (`if (tracer) ...`), with no allocation. initTracing() loads the SDK
 * (./tracingSdk.ts) by dynamic import when an endpoint is configured.
 */

/** What the server span records when the response is finished (built only while tracing is on). */
export interface ServedRequest {
  method: string;
  route: string | undefined;
  status: number;
  accountId: string | undefined;
  keyId: string | undefined;
  /** The gateway model that answered (the meter's), and the operation billed. */
  model: string | undefined;
  operation: string | undefined;
  /** The parsed JSON body, if any: the requested model and output cap are read from it. */
  body: unknown;
}

/** One upstream try, as the router makes it. */
export interface TryInfo {
  operation: string | undefined;
  model: string;
  deployment: string;
  provider: string;
  providerKind: string | undefined;
  upstreamModel: string;
  kind: 'first' | 'retry' | 'fallback';
}

/** Token counts of a settled request (src/billing/tokenUsage.ts TokenUsage). */
export interface UsageInfo {
  input: number;
  cacheRead: number;
  cacheWrite5m: number;
  cacheWrite1h: number;
  output: number;
  reasoning: number;
  estimated: boolean;
}

/** Watches one upstream HTTP answer: first chunk (time to first token), finish reasons, content when opted in. */
export interface UpstreamWatch {
  start(status: number, headers: IncomingHttpHeaders): void;
  data(chunk: Buffer): void;
  end(): void;
}

/**
 * A try whose span outlives its call: a stream read by the relays (native and translated) rather than by the
 * upstream dispatcher, so its span ends when the stream ends, with what the stream carried.
 */
export interface HeldTry {
  /** Raw SSE bytes of a native stream as they pass: first token, finish reasons, the response model, content. */
  data(chunk: Buffer): void;
  /** One chat chunk of a translated stream: its text, finish reason and model, when it has them. */
  chat(text: string, finishReason: string | null | undefined, model: string | undefined): void;
  /** Ends the span: the usage, and an error for a stream cut short (502); nothing for a client gone (499). */
  end(usage: UsageInfo | null, status: number): void;
}

export interface GatewayTracing {
  /** Starts the server span of a request, child of the client's `traceparent` if it sent one. */
  startServer(method: string, path: string, headers: IncomingHttpHeaders): Span;
  /** Runs `fn` with `span` as the active span (its children and the upstream `traceparent` follow it). */
  within<T>(span: Span, fn: () => Promise<T>): Promise<T>;
  endServer(span: Span, r: ServedRequest): void;
  /** The active span, if any (a routed call keeps its request's, to hang the settlement under it). */
  active(): Span | null;
  /**
   * Whether the active span records (is sampled): an unsampled request (or work outside any span) builds no span,
   * attribute or event.
   */
  recording(): boolean;
  startTry(t: TryInfo): Span;
  /**
   * Ends a try: `error` null when it answered 2xx (`upstreamModel`: the response model unless the answer named one).
   */
  endTry(span: Span, upstreamModel: string, error: unknown, failureClass: string | null): void;
  /** A try that answered a stream the relay reads: its span is ended by the HeldTry, when the stream ends. */
  holdTry(span: Span, upstreamModel: string, startedAt?: number): HeldTry;
  /** `headers` with the active span's `traceparent` (a copy: adapters share their header objects). */
  inject(headers: Record<string, string>): Record<string, string>;
  /** A watcher for the upstream answer of the active try (null outside a try). */
  watchUpstream(requestBody: string): UpstreamWatch | null;
  /** The settlement of a request: a child span of `parent` with the cost, and the usage and cost on `parent`. */
  settled(
    parent: Span,
    s: {
      operation: string;
      model: string;
      costVnd: number;
      status: number;
      deployment: string | null;
      usage: UsageInfo | null;
    },
  ): void;
  /** The log fields of a span: trace_id and span_id. */
  logFields(span: Span): { trace_id: string; span_id: string };
  /** Interceptors for a Temporal client (API process, worker's own client). */
  temporalClientInterceptors(): Promise<{ workflow: unknown[] }>;
  /** Worker options for Temporal: interceptors (workflow modules, activity) and the workflow span exporter sink. */
  temporalWorkerOptions(): Promise<{
    interceptors: { workflowModules: string[]; activity: unknown[] };
    sinks: Record<string, unknown>;
  }>;
  /** The workflow interceptor module, for the workflow bundle. */
  workflowInterceptorModule(): string;
  flush(): Promise<void>;
  shutdown(): Promise<void>;
}

/** The SDK's tracing while on; null while off (the default). */
export let tracer: GatewayTracing | null = null;
let starting: Promise<GatewayTracing | null> | null = null;

/** Whether the environment turns tracing on: an OTLP endpoint, or OTEL_TRACES_EXPORTER=otlp (default endpoint). */
export function tracingConfigured(env: NodeJS.ProcessEnv = process.env): boolean {
  if ((env.OTEL_SDK_DISABLED ?? '').trim().toLowerCase() === 'true') return false;
  const exporters = (env.OTEL_TRACES_EXPORTER ?? '')
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .filter(Boolean);
  if (exporters.includes('none')) return false;
  return !!(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) || exporters.includes('otlp');
}

/**
 * Turns tracing on when the environment configures it (once per process; later calls return the same). The
 * default service name applies when neither OTEL_SERVICE_NAME nor OTEL_RESOURCE_ATTRIBUTES names one.
 */
export function initTracing(
  defaultServiceName: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<GatewayTracing | null> {
  if (starting) return starting;
  if (!tracingConfigured(env)) return Promise.resolve(null);
  starting = import('./tracingSdk').then((m) => (tracer = m.startSdk(defaultServiceName, env)));
  starting.catch(() => {
    starting = null;
  });
  return starting;
}

/** Exports the spans still buffered (a process about to stop, a test about to read them). */
export async function flushTracing(): Promise<void> {
  await tracer?.flush();
}

/** Flushes and stops tracing; the process is about to exit. */
export async function shutdownTracing(): Promise<void> {
  const t = tracer;
  tracer = null;
  starting = null;
  await t?.shutdown();
}
