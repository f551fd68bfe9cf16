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
  /** The model the request asked for, as the route resolved it (Gemini's is in the URL, not the body). */
  requestedModel: string | undefined;
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
  /** The provider's `gen_ai.provider.name` (its kind's row says it). */
  providerName: string | undefined;
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

/**
 * The gateway's spans are handed along explicitly (a request's server span on its Koa state, a try's span in its
 * CallOptions), not found in an async context: on Node 20 an AsyncLocalStorage context costs every promise of the
 * process a hook once one sampled request has used it, so an API process would pay for tracing per request
 * whatever the sampling ratio. The async context (AsyncLocalStorage) is registered only where the Temporal
 * interceptors need it, in a process that runs a worker; an API process gets a context that lasts for the
 * synchronous call of `within` (enough for the Temporal client interceptor, which reads it before its first await).
 */
export interface GatewayTracing {
  /** Starts the server span of a request, child of the client's `traceparent` if it sent one. */
  startServer(method: string, path: string, headers: IncomingHttpHeaders): Span;
  /**
   * Runs `fn` with `span` as the active span: its whole run in a worker process (async context), its synchronous
   * part in an API process (a Temporal workflow start reads it there).
   */
  within<T>(span: Span, fn: () => Promise<T>): Promise<T>;
  endServer(span: Span, r: ServedRequest): void;
  /** Whether a request's span goes on upstream (traceparent): it is sampled, or it continues a client's trace. */
  propagates(span: Span): boolean;
  /** The active span of the async context, if any (an activity's, in a worker), and only while it records. */
  active(): Span | null;
  /** A try's span, child of its request's (`parent`, which records). */
  startTry(t: TryInfo, parent: Span): Span;
  /**
   * Ends a try: `error` null when it answered 2xx (`upstreamModel`: the response model unless the answer named one).
   */
  endTry(span: Span, upstreamModel: string, error: unknown, failureClass: string | null): void;
  /** A try that answered a stream the relay reads: its span is ended by the HeldTry, when the stream ends. */
  holdTry(span: Span, upstreamModel: string, startedAt?: number): HeldTry;
  /**
   * `headers` with the `traceparent` of `span` (a try's), else of the active span (an activity's): a copy, as
   * adapters share their header objects.
   */
  inject(headers: Record<string, string>, span?: Span | null): Record<string, string>;
  /** A watcher for the upstream answer of a try (`span`, null when the request is not sampled). */
  watchUpstream(requestBody: string, span: Span | null | undefined): UpstreamWatch | null;
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
  /** Keeps the active span in an async context (AsyncLocalStorage) from now on: a Temporal worker runs here. */
  useAsyncContext(): void;
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
 * `asyncContext`: the process runs a Temporal worker, whose interceptors keep an activity's span in the async
 * context; a later call that asks for it (the worker of `npm start`, after its API) turns it on.
 */
export async function initTracing(
  defaultServiceName: string,
  env: NodeJS.ProcessEnv = process.env,
  opts: { asyncContext?: boolean } = {},
): Promise<GatewayTracing | null> {
  if (!starting) {
    if (!tracingConfigured(env)) return null;
    starting = import('./tracingSdk').then((m) => (tracer = m.startSdk(defaultServiceName, env)));
    starting.catch(() => {
      starting = null;
    });
  }
  const t = await starting;
  if (t && opts.asyncContext) t.useAsyncContext();
  return t;
}

/**
 * `headers` with the traceparent of `span` (a try's; else the active span's) while tracing is on; the same object
 * while it is off.
 */
export function withTraceparent(headers: Record<string, string>, span?: Span | null): Record<string, string> {
  return tracer ? tracer.inject(headers, span) : headers;
}

/**
 * A whole answer read by an adapter that does not go through the upstream dispatcher, shown to its try's span as
 * the dispatcher shows one (status, finish reasons, the model that answered, content when captured), while sampled.
 */
export function watchWholeAnswer(requestBody: string, span: Span | null | undefined, status: number, body: Buffer) {
  const w = tracer?.watchUpstream(requestBody, span);
  if (!w) return;
  w.start(status, {});
  w.data(body);
  w.end();
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
