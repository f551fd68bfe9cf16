import type { SseSink } from '../sse';
import type { RelayTarget } from './caller';

/**
 * What an Output hands its tap (Output.tap, src/modelCall/caller.ts): each answer as it is written. The response
 * cache's recorder (src/cache/recorder.ts) is one. The answer is copied where it is written, so that the operation
 * writes to the same Output as every other request's: a recording Output wrapped around it made every call the
 * operation made on its caller and its output a call through a second class (measured: about 7 % of a miss's CPU).
 */
export interface OutputTap {
  json(body: unknown): void;
  bytes(body: Buffer): void;
  raw(body: Buffer, how?: { status?: number; type?: string }): void;
  /** The stream's sink, made: its events are copied through the sink's own tap. */
  sink(s: SseSink): void;
  /** The relay's target, made: the target the relay writes to instead (its writes copied). */
  relay(t: RelayTarget): RelayTarget;
}
