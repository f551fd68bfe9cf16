import fs from 'node:fs';
import path from 'node:path';
import type { IncomingHttpHeaders } from 'node:http';
import {
  context,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type ContextManager,
  type Span,
} from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { node, resources, tracing as sdk } from '@opentelemetry/sdk-node';
import { projectRoot } from '../projectRoot';
import type { GatewayTracing, HeldTry, ServedRequest, TryInfo, UpstreamWatch, UsageInfo } from './tracing';

/**
 * The OpenTelemetry SDK behind src/observability/tracing.ts, loaded only when tracing is on. Spans are exported
 * over OTLP/HTTP (http/protobuf by default, http/json when OTEL_EXPORTER_OTLP[_TRACES]_PROTOCOL says so) by a batch
 * processor; the exporters read the endpoint, headers and timeout from the environment themselves, the provider
 * reads the sampler (OTEL_TRACES_SAMPLER, default parentbased_always_on) and the propagators (OTEL_PROPAGATORS,
 * default W3C trace context and baggage). Attributes follow the OpenTelemetry HTTP and GenAI semantic conventions.
 */

const VERSION: string = JSON.parse(fs.readFileSync(path.join(projectRoot(), 'package.json'), 'utf8')).version;
/** Captured prompts and completions are cut here: a span is not a transcript store. */
const CONTENT_LIMIT = 16 * 1024;

/** The gateway's operations (the meter's names) as GenAI operation names. */
const OPERATIONS: Record<string, string> = {
  'chat.completions': 'chat',
  messages: 'chat',
  responses: 'chat',
  completions: 'text_completion',
  embeddings: 'embeddings',
  'images.generations': 'image_generation',
  'images.edits': 'image_generation',
  'audio.transcriptions': 'transcription',
  'audio.translations': 'translation',
  'audio.speech': 'speech',
  videos: 'video_generation',
};
const genAiOperation = (op: string | undefined): string | undefined =>
  op === undefined ? undefined : (OPERATIONS[op] ?? op);

function protocolOf(env: NodeJS.ProcessEnv): 'http/protobuf' | 'http/json' {
  const p = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL || env.OTEL_EXPORTER_OTLP_PROTOCOL || 'http/protobuf').trim();
  if (p === 'http/protobuf' || p === 'http/json') return p;
  throw new Error(`OTEL_EXPORTER_OTLP_PROTOCOL=${p} is not supported: use http/protobuf or http/json`);
}

function serviceResource(defaultName: string): resources.Resource {
  const fromEnv = resources.detectResourcesSync({ detectors: [resources.envDetectorSync] });
  return resources.Resource.default()
    .merge(new resources.Resource({ 'service.name': defaultName, 'service.version': VERSION }))
    .merge(fromEnv);
}

function exporterFor(protocol: 'http/protobuf' | 'http/json'): sdk.SpanExporter {
  /* eslint-disable @typescript-eslint/no-require-imports */
  if (protocol === 'http/json') return new (require('@opentelemetry/exporter-trace-otlp-http').OTLPTraceExporter)();
  return new (require('@opentelemetry/exporter-trace-otlp-proto').OTLPTraceExporter)();
  /* eslint-enable @typescript-eslint/no-require-imports */
}

/** Finish reasons as OpenAI, Anthropic, Gemini (STOP, MAX_TOKENS) and Bedrock Converse name them. */
const FINISH = /"(?:finish_reason|stop_reason|finishReason|stopReason)"\s*:\s*"([A-Za-z_]{1,40})"/g;
/** The first model an answer names (Gemini's `modelVersion`): the one the upstream says answered (a snapshot). */
const MODEL = /"(?:model|modelVersion)"\s*:\s*"([^"\\]{1,200})"/;

/** The GenAI usage attributes of a settled request. */
function usageAttributes(u: UsageInfo): Attributes {
  const a: Attributes = {
    'gen_ai.usage.input_tokens': u.input + u.cacheRead + u.cacheWrite5m + u.cacheWrite1h,
    'gen_ai.usage.output_tokens': u.output,
    'gen_ai.usage.cache_read.input_tokens': u.cacheRead,
    'gen_ai.usage.cache_creation.input_tokens': u.cacheWrite5m + u.cacheWrite1h,
  };
  if (u.reasoning) a['gen_ai.usage.reasoning.output_tokens'] = u.reasoning;
  if (u.estimated) a['gateway.usage_estimated'] = true;
  return a;
}

/** What a try's span learns from its answer as it passes: first token, finish reasons, the model, content. */
class Watch implements UpstreamWatch {
  sse = false;
  private first = true;
  private readonly reasons = new Set<string>();
  private output = '';
  private model: string | null = null;

  constructor(
    private readonly span: Span,
    private readonly capture: boolean,
    private readonly answered: WeakSet<Span>,
    private readonly named: WeakSet<Span>,
    private readonly started = performance.now(),
  ) {}

  start(status: number, headers: IncomingHttpHeaders): void {
    this.span.setAttribute('http.response.status_code', status);
    this.answered.add(this.span);
    this.sse = String(headers['content-type'] ?? '').startsWith('text/event-stream');
  }

  data(chunk: Buffer): void {
    this.firstToken();
    const text = chunk.toString('utf8');
    if (this.model === null) this.model = MODEL.exec(text)?.[1] ?? null;
    for (const m of text.matchAll(FINISH)) this.reasons.add(m[1].toLowerCase());
    this.captured(text);
  }

  chat(text: string, finishReason: string | null | undefined, model: string | undefined): void {
    this.firstToken();
    if (this.model === null && model) this.model = model;
    if (finishReason) this.reasons.add(finishReason);
    this.captured(text);
  }

  end(): void {
    if (this.reasons.size) this.span.setAttribute('gen_ai.response.finish_reasons', [...this.reasons]);
    if (this.capture) this.span.setAttribute('gen_ai.output.messages', this.output);
    if (this.model !== null) {
      this.span.setAttribute('gen_ai.response.model', this.model);
      this.named.add(this.span);
    }
  }

  private firstToken(): void {
    if (!this.first) return;
    this.first = false;
    if (this.sse)
      this.span.addEvent('gen_ai.first_token', {
        'gen_ai.server.time_to_first_token': (performance.now() - this.started) / 1000,
      });
  }

  private captured(text: string): void {
    if (this.capture && this.output.length < CONTENT_LIMIT)
      this.output += text.slice(0, CONTENT_LIMIT - this.output.length);
  }
}

/**
 * The context of an API process: active for the synchronous run of `with` only, at no cost to any promise (see
 * GatewayTracing). The gateway hands its spans along explicitly; the Temporal client interceptor reads the request's
 * span synchronously when a workflow is started within it.
 */
class CallContextManager implements ContextManager {
  private current: Context = ROOT_CONTEXT;

  active(): Context {
    return this.current;
  }

  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
    ctx: Context,
    fn: F,
    thisArg?: ThisParameterType<F>,
    ...args: A
  ): ReturnType<F> {
    const before = this.current;
    this.current = ctx;
    try {
      return fn.call(thisArg, ...args);
    } finally {
      this.current = before;
    }
  }

  bind<T>(ctx: Context, target: T): T {
    if (typeof target !== 'function') return target;
    const f = target as unknown as (...a: unknown[]) => unknown;
    const bound = (...a: unknown[]): unknown => this.with(ctx, f, undefined, ...a);
    return bound as unknown as T;
  }

  enable(): this {
    return this;
  }

  disable(): this {
    this.current = ROOT_CONTEXT;
    return this;
  }
}

class SdkTracing implements GatewayTracing {
  private asyncContext = false;

  private readonly tracer = trace.getTracer('model-gateway', VERSION);
  /** Tries whose upstream status was seen (the error a failed one throws carries the status sent to the client). */
  private readonly answered = new WeakSet<Span>();
  /** Tries whose answer named its model (gen_ai.response.model set from the upstream's response). */
  private readonly named = new WeakSet<Span>();
  /** Unsampled server spans that continue a client's trace. */
  private readonly joined = new WeakSet<Span>();

  constructor(
    private readonly provider: node.NodeTracerProvider,
    private readonly processor: sdk.SpanProcessor,
    private readonly resource: resources.Resource,
    private readonly capture: boolean,
  ) {}

  startServer(method: string, path: string, headers: IncomingHttpHeaders): Span {
    const parent = propagation.extract(ROOT_CONTEXT, headers);
    const span = this.tracer.startSpan(method, { kind: SpanKind.SERVER }, parent);
    // Set after the sampler's decision: an unsampled request builds no attribute.
    if (span.isRecording()) span.setAttributes({ 'http.request.method': method, 'url.path': path });
    else if (trace.getSpanContext(parent)) this.joined.add(span);
    return span;
  }

  propagates(span: Span): boolean {
    return span.isRecording() || this.joined.has(span);
  }

  within<T>(span: Span, fn: () => Promise<T>): Promise<T> {
    return context.with(trace.setSpan(context.active(), span), fn);
  }

  endServer(span: Span, r: ServedRequest): void {
    if (!span.isRecording()) {
      span.end();
      return;
    }
    if (r.route !== undefined) {
      span.updateName(`${r.method} ${r.route}`);
      span.setAttribute('http.route', r.route);
    }
    const a: Attributes = { 'http.response.status_code': r.status };
    if (r.accountId) a['gateway.account_id'] = r.accountId;
    if (r.keyId) a['gateway.key_id'] = r.keyId;
    const op = genAiOperation(r.operation);
    if (op) a['gen_ai.operation.name'] = op;
    if (r.model) a['gen_ai.response.model'] = r.model;
    const body = r.body && typeof r.body === 'object' ? (r.body as Record<string, unknown>) : null;
    if (typeof body?.model === 'string') a['gen_ai.request.model'] = body.model;
    else if (r.requestedModel) a['gen_ai.request.model'] = r.requestedModel;
    if (body) {
      const gemini = body.generationConfig as { maxOutputTokens?: unknown } | undefined;
      const cap = body.max_completion_tokens ?? body.max_tokens ?? body.max_output_tokens ?? gemini?.maxOutputTokens;
      if (typeof cap === 'number') a['gen_ai.request.max_tokens'] = cap;
      if (this.capture)
        a['gen_ai.input.messages'] = JSON.stringify(body.messages ?? body.input ?? body.prompt ?? null).slice(
          0,
          CONTENT_LIMIT,
        );
    }
    span.setAttributes(a);
    if (r.status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
    span.end();
  }

  active(): Span | null {
    const span = trace.getSpan(context.active());
    return span?.isRecording() ? span : null;
  }

  startTry(t: TryInfo, parent: Span): Span {
    const op = genAiOperation(t.operation);
    const a: Attributes = {
      'gen_ai.request.model': t.upstreamModel,
      'gateway.model': t.model,
      'gateway.deployment': t.deployment,
      'gateway.provider': t.provider,
      'gateway.try': t.kind,
    };
    if (op) a['gen_ai.operation.name'] = op;
    if (t.providerName) a['gen_ai.provider.name'] = t.providerName;
    if (t.kind !== 'first') a[`gateway.${t.kind}`] = true;
    return this.tracer.startSpan(
      `${op ?? 'call'} ${t.upstreamModel}`,
      { kind: SpanKind.CLIENT, attributes: a },
      trace.setSpan(ROOT_CONTEXT, parent),
    );
  }

  endTry(span: Span, upstreamModel: string, error: unknown, failureClass: string | null): void {
    if (error) {
      const status = (error as { status?: unknown }).status;
      if (typeof status === 'number' && !this.answered.has(span))
        span.setAttribute('http.response.status_code', status);
      span.setAttribute('error.type', failureClass ?? (error as Error).name ?? 'error');
      span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).message });
    } else if (!this.named.has(span)) {
      span.setAttribute('gen_ai.response.model', upstreamModel);
    }
    span.end();
  }

  holdTry(span: Span, upstreamModel: string, startedAt?: number): HeldTry {
    const watch = new Watch(span, this.capture, this.answered, this.named, startedAt);
    watch.sse = true;
    return {
      data: (chunk) => watch.data(chunk),
      chat: (text, finishReason, model) => watch.chat(text, finishReason, model),
      end: (usage, status) => {
        watch.end();
        if (usage) span.setAttributes(usageAttributes(usage));
        const cut = status >= 500 ? Object.assign(new Error('The upstream ended the stream early.'), { status }) : null;
        this.endTry(span, upstreamModel, cut, cut ? 'stream_cut' : null);
      },
    };
  }

  inject(headers: Record<string, string>, span?: Span | null): Record<string, string> {
    const out = { ...headers };
    propagation.inject(span ? trace.setSpan(ROOT_CONTEXT, span) : context.active(), out);
    return out;
  }

  watchUpstream(requestBody: string, span: Span | null | undefined): UpstreamWatch | null {
    if (!span || !span.isRecording()) return null;
    if (this.capture) span.setAttribute('gen_ai.input.messages', requestBody.slice(0, CONTENT_LIMIT));
    return new Watch(span, this.capture, this.answered, this.named);
  }

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
  ): void {
    // The caller holds `parent` only while it is sampled; it may have ended (its client gone): the settlement is
    // still its child.
    const a: Attributes = { 'gateway.cost_vnd': s.costVnd, 'gen_ai.response.model': s.model };
    const op = genAiOperation(s.operation);
    if (op) a['gen_ai.operation.name'] = op;
    if (s.usage) Object.assign(a, usageAttributes(s.usage));
    parent.setAttributes(a);
    const settle = this.tracer.startSpan(
      'gateway.settle',
      {
        attributes: {
          ...a,
          'gateway.status': s.status,
          ...(s.deployment ? { 'gateway.deployment': s.deployment } : {}),
        },
      },
      trace.setSpan(ROOT_CONTEXT, parent),
    );
    settle.end();
  }

  logFields(span: Span): { trace_id: string; span_id: string } {
    const c = span.spanContext();
    return { trace_id: c.traceId, span_id: c.spanId };
  }

  async temporalClientInterceptors(): Promise<{ workflow: unknown[] }> {
    const { OpenTelemetryWorkflowClientInterceptor } =
      await import('@temporalio/interceptors-opentelemetry/lib/client');
    return { workflow: [new OpenTelemetryWorkflowClientInterceptor()] };
  }

  async temporalWorkerOptions(): Promise<{
    interceptors: { workflowModules: string[]; activity: unknown[] };
    sinks: Record<string, unknown>;
  }> {
    const w = await import('@temporalio/interceptors-opentelemetry/lib/worker');
    return {
      interceptors: {
        workflowModules: [this.workflowInterceptorModule()],
        activity: [
          (ctx: ConstructorParameters<typeof w.OpenTelemetryActivityInboundInterceptor>[0]) => ({
            inbound: new w.OpenTelemetryActivityInboundInterceptor(ctx),
            outbound: new w.OpenTelemetryActivityOutboundInterceptor(ctx),
          }),
        ],
      },
      // Workflow spans are made in the workflow sandbox and handed out through this sink (not called on replay).
      sinks: { exporter: w.makeWorkflowExporter(this.processor, this.resource) },
    };
  }

  workflowInterceptorModule(): string {
    return require.resolve('@temporalio/interceptors-opentelemetry/lib/workflow-interceptors');
  }

  useAsyncContext(): void {
    if (this.asyncContext) return;
    this.asyncContext = true;
    context.disable();
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  }

  flush(): Promise<void> {
    return this.provider.forceFlush();
  }

  async shutdown(): Promise<void> {
    await this.provider.shutdown();
    trace.disable();
    context.disable();
    propagation.disable();
  }
}

/**
 * Starts the SDK: the provider registered globally (the call-scoped context until a worker asks for the async one,
 * W3C propagation), OTLP export.
 */
export function startSdk(defaultServiceName: string, env: NodeJS.ProcessEnv): GatewayTracing {
  const resource = serviceResource(defaultServiceName);
  const processor = new sdk.BatchSpanProcessor(exporterFor(protocolOf(env)));
  const provider = new node.NodeTracerProvider({ resource, spanProcessors: [processor] });
  provider.register({ contextManager: new CallContextManager() });
  return new SdkTracing(
    provider,
    processor,
    resource,
    (env.OTEL_CAPTURE_CONTENT ?? '').trim().toLowerCase() === 'true',
  );
}
