import type { IncomingHttpHeaders } from 'node:http';

/**
 * Where a streamed 2xx upstream answer goes, as it arrives: what a provider adapter's streamTo pushes into
 * (src/providers/types.ts); SseRelay (./clientRelay.ts) is the one sink.
 */
export interface StreamSink {
  /** The answer's status and headers (2xx only); its body follows. */
  start(status: number, headers: IncomingHttpHeaders): void;
  /** One body chunk; false asks the upstream to pause until `resume` is called. */
  data(chunk: Buffer, resume: () => void): boolean;
  /** The body ended. */
  end(): void;
  /** The upstream failed, or the signal cancelled the request, after start. */
  fail(err: Error): void;
}
