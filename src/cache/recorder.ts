import type { ServerResponse } from 'node:http';
import type { OutputTap, RelayTarget } from '../modelCall';
import type { SseSink } from '../sse';
import { COST_SLOT_BYTES, type EntryKind } from './entry';

/**
 * The answer of a miss as the client got it, captured on its way out: the request's Output hands it each answer as
 * it writes it (Output.tap), and it keeps a copy (the whole JSON, or every byte of the stream), up to the entry size
 * limit.
 */
export class Recorder implements OutputTap {
  kind: EntryKind | null = null;
  type: string | undefined;
  private parts: (string | Buffer)[] = [];
  private size = 0;
  /** Past the entry size limit: nothing is kept. */
  tooLarge = false;

  constructor(private readonly maxBytes: number) {}

  private add(d: string | Uint8Array): void {
    if (this.tooLarge) return;
    this.size += typeof d === 'string' ? Buffer.byteLength(d) : d.length;
    if (this.size > this.maxBytes) {
      this.tooLarge = true;
      this.parts = [];
      return;
    }
    // Kept as written (the response's chunks are not reused), copied only when not a Buffer.
    this.parts.push(typeof d === 'string' || Buffer.isBuffer(d) ? d : Buffer.from(d));
  }

  /**
   * What was captured, as bytes (an answer relayed as it came is not decoded), a stream's own cost comment replaced
   * by COST_SLOT (each replay writes its own).
   */
  body(): Buffer {
    const parts = this.parts;
    const all =
      parts.length === 1 && typeof parts[0] !== 'string'
        ? parts[0]
        : Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p) : p)));
    if (this.kind !== 'sse') return all;
    const at = all.lastIndexOf(COST_COMMENT_START);
    const end = at < 0 ? -1 : all.indexOf('\n\n', at);
    if (end < 0 || !COST_COMMENT.test(all.toString('latin1', at, end + 2))) return all;
    return Buffer.concat([all.subarray(0, at), COST_SLOT_BYTES, all.subarray(end + 2)]);
  }

  json(body: unknown): void {
    this.kind = 'json';
    this.add(JSON.stringify(body));
  }
  bytes(body: Buffer): void {
    this.kind = 'json';
    this.add(body);
  }
  raw(body: Buffer, how?: { status?: number; type?: string }): void {
    // Only a 200 is an answer worth keeping (the Anthropic pass-through relays other statuses as they came).
    if ((how?.status ?? 200) === 200) {
      this.kind = 'raw';
      this.type = how?.type;
      this.add(body);
    }
  }
  sink(s: SseSink): void {
    this.kind = 'sse';
    s.tap = (d) => this.add(d);
  }
  relay(t: RelayTarget): RelayTarget {
    this.kind = 'sse';
    const res = tee(t.res, (d) => this.add(d));
    return { res, streaming: () => t.streaming(), ended: (status) => t.ended(status) };
  }
}

/** The cost comment the routed call writes last in a stream (src/modelCall/routedCall.ts costComment). */
const COST_COMMENT = /^: x-gateway-cost-vnd=\d+ x-gateway-usage-id=[0-9a-f-]+\n\n$/;
const COST_COMMENT_START = ': x-gateway-cost-vnd=';

/** The relay's response with its writes copied to `add` (everything else is the response's own). */
function tee(res: ServerResponse, add: (d: string | Uint8Array) => void): ServerResponse {
  return new Proxy(res, {
    get(target, prop) {
      if (prop === 'write')
        return (chunk: string | Uint8Array, ...rest: unknown[]) => {
          add(chunk);
          return (target.write as (...a: unknown[]) => boolean)(chunk, ...rest);
        };
      if (prop === 'end')
        return (chunk?: unknown, ...rest: unknown[]) => {
          if (typeof chunk === 'string' || chunk instanceof Uint8Array) add(chunk);
          return (target.end as (...a: unknown[]) => ServerResponse)(chunk, ...rest);
        };
      const v = Reflect.get(target, prop, target);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
}
