import type { Span } from '@opentelemetry/api';
import type { RouteRecorder, RouteTry } from './modelRouter';
import type { RequestAbort } from '../net';
import type { CallOptions } from '../providers';
import { tracer } from '../observability';

/**
 * Records the try that answered a routed call made outside an HTTP request (a batch item, a video submission): the
 * usage record's deployment and routing, the model billed, and the try's span under the activity's.
 */
export class TryRecord implements RouteRecorder {
  t: RouteTry | null = null;
  /** The activity's span while it records (the worker's async context): the tries' spans are its children. */
  readonly traceSpan: Span | null = tracer ? tracer.active() : null;
  private trySpan: Span | null = null;

  constructor(readonly operation: string) {}

  routed(t: RouteTry, span: Span | null): void {
    this.t = t;
    this.trySpan = span;
  }

  /** The options of the upstream call of the try in flight: the item's abort, the try's span. */
  tryOptions(abort: RequestAbort): CallOptions {
    return { abort, trace: this.trySpan };
  }

  /** Runs `fn` with the try's span active, for adapters that read the active span (the video providers' calls). */
  within<T>(fn: () => Promise<T>): Promise<T> {
    return this.trySpan && tracer ? tracer.within(this.trySpan, fn) : fn();
  }
}
