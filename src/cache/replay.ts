import type { Output } from '../modelCall';
import { COST_SLOT, type CacheEntry } from './entry';

/**
 * A hit's answer, as the miss that stored it was answered: the same JSON, or the same stream events (its usage
 * event and terminator included), with this request's own cost comment where the original's was.
 */
export async function replay(entry: CacheEntry, out: Output, costComment: string): Promise<void> {
  if (entry.kind === 'json') return out.bytes(Buffer.from(entry.body));
  if (entry.kind === 'raw') return out.raw(Buffer.from(entry.body), { type: entry.type });
  const sink = out.sink();
  sink.open();
  const at = entry.body.indexOf(COST_SLOT);
  const text =
    at < 0 ? entry.body + costComment : entry.body.slice(0, at) + costComment + entry.body.slice(at + COST_SLOT.length);
  await sink.write(text);
  sink.end();
}
