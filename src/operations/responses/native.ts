import {
  type Caller,
  type OperationDeps,
  countImages,
  estimatedUsage,
  estimateNative,
  openaiUpstream,
  openCall,
  requireOpenAIProvider,
  RoutedPayload,
  type Estimate,
  relayNative,
  type NativeEvents,
} from '../../modelCall';
import { invalidUpstreamResponse } from '../../errors';
import { checkOutputCap, redactorFor } from '../../catalog';
import { type ResponseObject, newId } from '../../translate';
import { formatSse } from '../../sse';
import type { EventSourceMessage } from '../../sse';
import { storeTurn, usageOf, type PreparedTurn, type Turn } from './turn';

/**
 * POST /v1/responses on a model marked `api: "responses"`: passed through to its upstream's /responses (the
 * stored conversation's items prepended), SSE forwarded as produced, usage and the final response read as they pass.
 */

const OPERATION = 'responses';
const TERMINAL = new Set(['response.completed', 'response.incomplete', 'response.failed']);

/** Native pass-through to an upstream /responses: checked and estimated here, run by `execute`. */
export function prepareNativeResponses(deps: OperationDeps, t: Turn): PreparedTurn {
  checkOutputCap(t.model, 'max_output_tokens', t.req.max_output_tokens);
  requireOpenAIProvider(deps, t.model); // a misconfigured provider is refused before funds are reserved
  const body: { model: string; [k: string]: unknown } = {
    ...t.req,
    model: t.model.upstreamModel,
    input: [...t.history, ...t.input],
  };
  delete body.previous_response_id;
  const payloads = new RoutedPayload(body);
  const bytes = Buffer.byteLength(payloads.payload);
  // Reserved once for the most expensive model and deployment that may answer (retries and fallbacks included).
  const estimate = estimateNative(deps, t.model, {
    bytes,
    maxOutput: t.req.max_output_tokens,
    media: countImages(body.input),
  });
  return { estimate, execute: (caller) => runNative(caller, deps, t, payloads, bytes, estimate) };
}

async function runNative(
  caller: Caller,
  deps: OperationDeps,
  t: Turn,
  payloads: RoutedPayload<{ model: string }>,
  bytes: number,
  estimate: Estimate,
): Promise<void> {
  const call = await openCall(caller, deps, t.model, OPERATION, estimate);
  if (t.req.stream !== true) {
    const raw = (
      await call.attempt(openaiUpstream, (a, r) => a.postJson('/responses', payloads.for(r), call.tryOptions))
    ).body;
    let obj: ResponseObject | null = null;
    try {
      obj = JSON.parse(raw.toString('utf8')) as ResponseObject;
    } catch {}
    if (obj === null || typeof obj !== 'object' || Array.isArray(obj)) {
      call.cancel(502);
      throw invalidUpstreamResponse();
    }
    call.settle(usageOf(obj) ?? estimatedUsage(bytes, raw.length));
    call.setCostHeaders();
    // Text Postgres cannot hold is stored as U+FFFD, so only an outage fails here: then say it was not stored.
    if (await storeTurn(caller, deps, t, obj)) caller.out.raw(raw);
    else caller.out.json({ ...obj, store: false });
    return;
  }
  const res = await call.attemptStream(openaiUpstream, (a, r) =>
    a.postStream('/responses', payloads.for(r), call.tryOptions),
  );
  await relayNative(
    { call, sink: caller.out.sink(), logger: deps.logger, name: 'responses upstream' },
    res.body,
    new ResponsesEvents(caller, deps, t, bytes),
  );
}

/**
 * The Responses events as they pass: usage and the final response read, the final event corrected before it leaves
 * when the turn was to be stored and was not (`store: false`, so no client is promised a response GET
 * /v1/responses/{id} cannot find); error events, and the error of a failed response, redacted for the client.
 */
class ResponsesEvents implements NativeEvents {
  readonly failed = false;
  private readonly redact: (text: string) => string;
  private lastSeq = -1;
  private shell: Record<string, unknown> | null = null;
  private final: Record<string, unknown> | null = null;
  private delivered = 0;

  constructor(
    private readonly caller: Caller,
    private readonly deps: OperationDeps,
    private readonly t: Turn,
    private readonly bytes: number,
  ) {
    this.redact = redactorFor(deps.catalog);
  }

  get finished(): boolean {
    return this.final !== null;
  }

  async observe(ev: EventSourceMessage): Promise<string | null> {
    let e: any;
    try {
      e = JSON.parse(ev.data);
    } catch {
      return null;
    }
    if (typeof e?.sequence_number === 'number') this.lastSeq = e.sequence_number;
    if (typeof e?.delta === 'string') this.delivered += e.delta.length;
    if (e?.type === 'response.created' || e?.type === 'response.in_progress') this.shell = e.response ?? this.shell;
    let data: string | null = null;
    if (TERMINAL.has(e?.type) && !this.final && e.response && typeof e.response === 'object') {
      const final = (this.final = e.response as Record<string, unknown>);
      // Stored before the client sees the final event, so an immediate continuation finds it.
      const stored = final.status !== 'failed' && (await storeTurn(this.caller, this.deps, this.t, final));
      if (this.t.store && !stored && final.store !== false) {
        final.store = false;
        data = JSON.stringify(e);
      }
    }
    return e?.type === 'error' || e?.type === 'response.failed' ? this.redact(data ?? ev.data) : data;
  }

  bill() {
    const u = this.final ? usageOf(this.final as ResponseObject) : null;
    return { usage: u ?? estimatedUsage(this.bytes, this.delivered), complete: u !== null };
  }

  /** Clients (Codex) need a terminal event; the upstream stopped without one. Nothing was stored. */
  interrupted(): string {
    const response = {
      ...(this.shell ?? { id: newId('resp'), object: 'response', model: this.t.req.model, output: [] }),
      status: 'failed',
      store: false,
      error: { code: 'server_error', message: 'The upstream provider stream was interrupted.' },
    };
    return formatSse({
      event: 'response.failed',
      data: { type: 'response.failed', sequence_number: this.lastSeq + 1, response },
    });
  }
}
