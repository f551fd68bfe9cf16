import type { Span } from '@opentelemetry/api';
import type { RouteRecorder, RouteTry } from '../routing/modelRouter';
import type { RequestAbort } from '../net/abort';
import type { CallOptions } from '../providers/types';
import { tracer } from '../observability/tracing';

/** Records a batch item's try that answered (the usage record's deployment and routing, the model billed). */
export class TryRecord implements RouteRecorder {
  t: RouteTry | null = null;
  /** The batch activity's span while it records (the worker's async context): the item's tries are its children. */
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
}
