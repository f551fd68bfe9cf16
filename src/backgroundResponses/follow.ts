import type { AppDeps } from '../operations/deps';
import type { Caller } from '../modelCall';
import * as repo from './repo';

/**
 * The SSE stream of a background response, from the store: the stored events after `after` (a sequence number; -1
 * for all), then the new ones as the worker stores them (the table read every followPollMs), until the response
 * is final and every event is sent. Every client reads the same stored bytes, so a resumed stream is identical to
 * the one a client connected from the start saw.
 */
export async function followEvents(
  caller: Pick<Caller, 'abort' | 'out'>,
  deps: Pick<AppDeps, 'db' | 'config'>,
  id: string,
  after: number,
): Promise<void> {
  const abort = caller.abort;
  const sink = caller.out.sink();
  sink.open();
  let last = after;
  let finalSeen = false;
  while (!abort.aborted) {
    const events = await repo.eventsAfter(deps.db, id, last);
    if (events.length) {
      let out = '';
      for (const e of events) {
        out += `event: ${e.event}\ndata: ${e.data}\n\n`;
        last = e.seq;
      }
      if (!(await sink.write(out))) return;
      continue;
    }
    // Events are stored before the response ends: once it is final, one more read finds every one.
    if (finalSeen) break;
    const row = await repo.getResponse(deps.db, id);
    if (!row || row.deleted || repo.isFinal(row.status)) {
      finalSeen = true;
      continue;
    }
    await new Promise<void>((r) => {
      let off = () => {};
      const t = setTimeout(() => {
        off();
        r();
      }, deps.config.backgroundResponses.followPollMs);
      off = abort.onAbort(() => {
        clearTimeout(t);
        r();
      });
    });
  }
  sink.end();
}
