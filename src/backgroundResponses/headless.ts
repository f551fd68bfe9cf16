import { EventEmitter } from 'node:events';
import type { Span } from '@opentelemetry/api';
import type { ServerResponse } from 'node:http';
import { holdBilling, type Caller, type HoldBilling, type Output, type RelayTarget } from '../modelCall';
import type { RoutedCall, Reservation, UsageInput } from '../modelCall';
import type { RequestAbort } from '../net/abort';
import type { Principal } from '../auth/apiKeys';
import { SseSink } from '../sse/clientSink';
import { SseDecoder, type EventSourceMessage } from '../sse/upstreamEvents';

/**
 * POST /v1/responses run without HTTP, for a background response: the route's own operation (createResponse) given
 * a caller whose output is an event capture, and money taken from the response's hold instead of a credit
 * lease (src/operations/caller.ts). Nothing of the endpoint's rules is repeated here; only the two edges differ:
 *  - the client: SSE the operation writes is decoded into events and handed on (stored by the caller) before the
 *    operation may write more (backpressure, so events are stored in order and none is lost);
 *  - the money: the hold was placed at POST, so the reservation only records the bill the operation settles; the
 *    caller charges it from the hold with the response's end (repo.endResponse), once.
 */

/** The bill the operation settled: its cost and usage record, or null when it charged nothing. */
export class HoldTab implements Reservation {
  bill: { cost: number; usage: UsageInput } | null = null;
  unanswered: UsageInput | null = null;

  constructor(
    readonly accountId: string,
    readonly reserved: number,
  ) {}

  settle(cost: number, usage: UsageInput): number {
    this.bill ??= { cost, usage };
    return cost;
  }

  cancel(usage?: UsageInput): void {
    this.unanswered ??= usage ?? null;
  }
}

/** The parts of a ServerResponse the SSE sink writes through, capturing the events instead of sending them. */
export class EventCapture extends EventEmitter {
  headersSent = false;
  writableEnded = false;
  writableFinished = false;
  destroyed = false;
  failure: unknown = null;
  private readonly decoder = new SseDecoder();
  private chain: Promise<void> = Promise.resolve();

  constructor(private readonly onEvents: (events: EventSourceMessage[]) => Promise<void>) {
    super();
  }

  writeHead(): this {
    this.headersSent = true;
    return this;
  }
  flushHeaders(): void {}
  setHeader(): this {
    return this;
  }

  /** Always "congested" while events are being stored: the sink waits for 'drain' before writing more. */
  write(data: string | Uint8Array): boolean {
    if (this.destroyed) return false;
    const events = this.decoder.push(data);
    if (!events.length) return true;
    this.chain = this.chain.then(() => this.onEvents(events));
    this.chain.then(
      () => this.emit('drain'),
      (e: unknown) => {
        // Storing failed (the database went away): the operation stops as if its client had left.
        this.failure = e;
        this.destroyed = true;
        this.emit('close');
      },
    );
    return false;
  }

  end(data?: string | Uint8Array): void {
    if (data) this.write(data);
    const rest = this.decoder.end();
    if (rest.length) this.chain = this.chain.then(() => this.onEvents(rest));
    this.writableEnded = this.writableFinished = true;
  }

  /** Every captured event handed on (throws what storing threw). */
  async settled(): Promise<void> {
    await this.chain;
    if (this.failure) throw this.failure;
  }
}

/**
 * The caller the operation runs for: the principal of the POST, `abort` its end, the capture as its output (its
 * stream's events), the hold's tab as its money, and the span its upstream tries hang under (the activity's, so the
 * call stays in the trace of the POST). Rate limits were counted at POST; key settings are not re-read (the POST
 * already checked the key).
 */
export class HeadlessCaller implements Caller, Output {
  readonly anthropicHeaders = false;
  readonly billing: HoldBilling;
  call?: RoutedCall;
  rateLimitHeaders?: boolean;

  constructor(
    public principal: Principal,
    readonly requestId: string,
    private readonly capture: EventCapture,
    readonly abort: RequestAbort,
    tab: HoldTab,
    readonly span: Span | null = null,
  ) {
    this.billing = holdBilling(tab);
  }

  get out(): Output {
    return this;
  }

  setHeader(): void {}

  // The operation runs with `stream: true`: a whole answer never comes.
  json(): void {}
  bytes(): void {}
  raw(): void {}

  sink(): SseSink {
    const res = this.capture as unknown as ServerResponse;
    return new SseSink({ res, status: 404, respond: true, state: { requestId: this.requestId } }, this.abort);
  }

  relay(): RelayTarget {
    throw new Error('a background response is not relayed as chat completions');
  }
}
