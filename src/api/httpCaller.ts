import type { Principal } from '../auth';
import { accountBilling, type AccountBilling, type Caller, type Output, type RelayTarget } from '../operations';
import type { RoutedCall, AffinitySource, OutputTap } from '../modelCall';
import { clientAbort, type RequestAbort } from '../net';
import { SseSink } from '../sse';
import type { Span } from '@opentelemetry/api';
import type { Ctx } from './requestState';
import { sendJsonBuffer } from './jsonBuffer';

/**
 * The request's RequestAbort, made on first need: aborted with a ClientClosed when the client disconnects before
 * its response is complete. Every upstream call of the request and every client stream share it.
 */
export function requestAbort(ctx: Ctx): RequestAbort {
  return (ctx.state.abort ??= clientAbort(ctx.res));
}

/**
 * An HTTP request as an operation's Caller (src/operations/caller.ts), and the Koa response as its Output: one
 * small object per request, reading and writing the context it wraps (nothing copied). The wire output is what the
 * routers wrote themselves before the operations left src/api/.
 */
export class HttpCaller implements Caller, Output, RelayTarget {
  /** What routes the request by prompt cache (src/modelCall/affinity.ts), set by its operation. */
  promptCache: AffinitySource | null = null;

  constructor(
    private readonly ctx: Ctx,
    readonly billing: AccountBilling,
  ) {}

  get out(): Output {
    return this;
  }
  get requestId(): string {
    return this.ctx.state.requestId;
  }
  get principal(): Principal {
    return this.ctx.state.principal!;
  }
  set principal(p: Principal) {
    this.ctx.state.principal = p;
  }
  get abort(): RequestAbort {
    return requestAbort(this.ctx);
  }
  get span(): Span | null {
    return this.ctx.state.span ?? null;
  }
  get anthropicHeaders(): boolean {
    return this.ctx.state.errorShape === 'anthropic';
  }
  get call(): RoutedCall | undefined {
    return this.ctx.state.call;
  }
  /** errorHandler cancels it if an error escapes before it settles. */
  set call(c: RoutedCall | undefined) {
    this.ctx.state.call = c;
  }
  get cacheDirective(): string | undefined {
    return this.ctx.get('x-gateway-cache') || undefined;
  }
  get rateLimitHeaders(): boolean {
    return this.ctx.state.rateLimitHeaders === true;
  }
  set rateLimitHeaders(v: boolean) {
    this.ctx.state.rateLimitHeaders = v;
  }

  // Output

  /** What the answer is copied to as it is written (the response cache's recorder: Output.tap), or null. */
  private tapped: OutputTap | null = null;

  tap(tap: OutputTap): void {
    this.tapped = tap;
  }
  setHeader(name: string, value: string): void {
    const res = this.ctx.res;
    if (!res.headersSent) res.setHeader(name, value);
  }
  json(body: unknown): void {
    this.tapped?.json(body);
    this.ctx.body = body;
  }
  bytes(body: Buffer): void {
    this.tapped?.bytes(body);
    sendJsonBuffer(this.ctx, body);
  }
  raw(body: Buffer, how: { status?: number; type?: string; headers?: Record<string, string> } = {}): void {
    this.tapped?.raw(body, how);
    const ctx = this.ctx;
    if (how.headers) for (const k in how.headers) ctx.set(k, how.headers[k]);
    if (how.status !== undefined) ctx.status = how.status;
    ctx.type = how.type || 'application/json';
    ctx.body = body;
  }
  sink(): SseSink {
    const s = new SseSink(this.ctx, requestAbort(this.ctx));
    this.tapped?.sink(s);
    return s;
  }
  relay(): RelayTarget {
    return this.tapped ? this.tapped.relay(this) : this;
  }

  // RelayTarget: the chat pass-through writes the response itself (Koa does not send it).

  get res() {
    return this.ctx.res;
  }
  streaming(): void {
    this.ctx.respond = false;
  }
  ended(status: number): void {
    if (status !== 200) this.ctx.state.endedWith = status; // for the request log and metrics
  }
}

const billings = new WeakMap<object, AccountBilling>();

/**
 * The request as a Caller paying from its account (pay as you go): the billing is made once per app's deps and
 * shared by every request.
 */
export function callerOf(ctx: Ctx, deps: Parameters<typeof accountBilling>[0]): HttpCaller {
  let b = billings.get(deps);
  if (!b) billings.set(deps, (b = accountBilling(deps)));
  return new HttpCaller(ctx, b);
}
