import type { Output } from '../modelCall';
import { COST_SLOT_BYTES, type CacheEntry } from './entry';

/**
 * A hit's answer, as the miss that stored it was answered: the same JSON, or the same stream events (its usage
 * event and terminator included), with this request's own cost comment where the original's was.
 */
export async function replay(entry: CacheEntry, out: Output, costComment: string): Promise<void> {
  const body = entry.body;
  if (entry.kind === 'json') return out.bytes(body);
  if (entry.kind === 'raw') return out.raw(body, { type: entry.type });
  const sink = out.sink();
  sink.open();
  const at = body.indexOf(COST_SLOT_BYTES);
  const comment = Buffer.from(costComment);
  await sink.write(
    at < 0
      ? Buffer.concat([body, comment])
      : Buffer.concat([body.subarray(0, at), comment, body.subarray(at + COST_SLOT_BYTES.length)]),
  );
  sink.end();
}
