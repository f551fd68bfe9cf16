import type { EmulatorControl } from './control';

/**
 * The engine behind the emulated native batch APIs (OpenAI /v1/batches, Anthropic /v1/messages/batches): a batch
 * waits `settings.batchQueueMs` in the "provider's queue", then runs its items through the emulator's own
 * endpoints over HTTP (so every reply, token count and fault is the one a direct call gets), a few at a time. A
 * cancel stops it between items; `settings.batchExpireAfterMs` (0: never) ends it as expired with its unfinished
 * items unrun. State lives in memory, per emulator, bounded.
 */

export interface BatchItem {
  /** Path on the emulator, e.g. /openai/v1/chat/completions. */
  path: string;
  body: unknown;
  /** Not sent (refused at creation): its result stays undefined. */
  skip?: boolean;
}

export interface ItemResult {
  status: number;
  body: unknown;
  requestId: string;
}

export type BatchEnd = 'completed' | 'cancelled' | 'expired';

export interface BatchRun {
  readonly items: BatchItem[];
  /** One slot per item: undefined while the item has not run (and, once ended, if it never did). */
  readonly results: (ItemResult | undefined)[];
  startedAt: number | null;
  cancelRequestedAt: number | null;
  endedAt: number | null;
  end: BatchEnd | null;
  /** Resolves when the run has ended (tests and the formats' finishers wait on it). */
  readonly done: Promise<void>;
}

const CONCURRENCY = 8;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Starts a run in the background; `origin` is the emulator's URL plus the deployment prefix the batch came in on. */
export function startRun(
  ctl: EmulatorControl,
  origin: string,
  items: BatchItem[],
  headers: Record<string, string>,
  onEnd: (run: BatchRun) => void,
): BatchRun {
  let resolve!: () => void;
  const run: BatchRun = {
    items,
    results: new Array(items.length).fill(undefined),
    startedAt: null,
    cancelRequestedAt: null,
    endedAt: null,
    end: null,
    done: new Promise<void>((r) => (resolve = r)),
  };
  const createdAt = Date.now();
  const expireAfter = ctl.settings.batchExpireAfterMs;
  const expired = () => expireAfter > 0 && Date.now() - createdAt >= expireAfter;
  const stopped = () => run.cancelRequestedAt !== null || expired();

  const callOne = async (i: number): Promise<ItemResult> => {
    try {
      const res = await fetch(origin + items[i].path, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify(items[i].body),
      });
      const text = await res.text();
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        body = { error: { message: text.slice(0, 200), type: 'server_error', param: null, code: null } };
      }
      if (ctl.settings.batchResultsWithoutUsage && body && typeof body === 'object')
        delete (body as { usage?: unknown }).usage;
      return { status: res.status, body, requestId: `req_emub${i.toString(36)}${Date.now().toString(36)}` };
    } catch (e) {
      const message = `emulated upstream unreachable: ${(e as Error).message}`;
      return {
        status: 500,
        body: { error: { message, type: 'server_error', param: null, code: null } },
        requestId: '',
      };
    }
  };

  void (async () => {
    const queueUntil = createdAt + ctl.settings.batchQueueMs;
    while (Date.now() < queueUntil && !stopped()) await sleep(Math.min(20, queueUntil - Date.now()));
    run.startedAt = Date.now();
    let next = 0;
    const worker = async () => {
      while (next < items.length && !stopped()) {
        const i = next++;
        if (!items[i].skip) run.results[i] = await callOne(i);
      }
    };
    await Promise.all(Array.from({ length: Math.min(CONCURRENCY, items.length) }, worker));
    run.end = run.cancelRequestedAt !== null ? 'cancelled' : next < items.length ? 'expired' : 'completed';
    run.endedAt = Date.now();
    onEnd(run);
    resolve();
  })();
  return run;
}

/** Keeps a map at most `max` entries long by dropping the oldest (insertion order). */
export function bounded<K, V>(map: Map<K, V>, key: K, value: V, max = 1000): void {
  map.set(key, value);
  while (map.size > max) map.delete(map.keys().next().value as K);
}
