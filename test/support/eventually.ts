/**
 * Waiting in tests without a time budget of their own. How fast work goes depends on the machine (two shared cores,
 * a CI runner, files running side by side), so no wait here fails after a fixed count of seconds:
 * - a wait lasts as long as the test or hook that waits may run (its jest timeout, whose deadline
 *   test/support/logEnvironment.js records), and gives up a moment before it with the last error it saw;
 * - a wait given `progress` (a count, a status) also gives up when that stopped moving for `stallMs`: bulk work is
 *   judged by whether it advances, and its test's jest timeout is sized for a slow machine.
 * A wait whose test ended (it timed out, or failed elsewhere) stops polling.
 */

interface TestRun {
  deadline: number;
  ended: boolean;
}

/** Outside a test or hook (no deadline recorded) a wait lasts at most this long. */
const NO_TEST_MS = 10 * 60_000;
/** A wait gives up this long before its test's deadline, so that its own message (not jest's timeout) is shown. */
const MARGIN_MS = 1_000;

function currentRun(): TestRun {
  return (globalThis as any).__gwTestRun ?? { deadline: Date.now() + NO_TEST_MS, ended: false };
}

/** Milliseconds left before the running test or hook times out (less a margin for a clear message). */
export function testTimeLeft(): number {
  return currentRun().deadline - MARGIN_MS - Date.now();
}

export interface EventuallyOptions {
  /** Milliseconds between polls. */
  every?: number;
  /** What the waited-for work has achieved so far (compared as JSON between polls). */
  progress?: () => unknown;
  /** With `progress`: give up when it has not changed for this long. */
  stallMs?: number;
}

/** Polls `fn` until it returns a truthy value; see the module's comment for when it gives up. */
export async function eventually<T>(
  fn: () => Promise<T | null | undefined | false>,
  opts: EventuallyOptions = {},
): Promise<T> {
  const { every = 50, progress, stallMs = 60_000 } = opts;
  const run = currentRun();
  const started = Date.now();
  let last: unknown;
  let seen: string | undefined;
  let movedAt = Date.now();
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    const why = (what: string) =>
      new Error(`condition not met: ${what}${last ? `; last error: ${(last as Error).message}` : ''}`);
    if (run.ended) throw why('its test ended');
    if (progress) {
      const now = JSON.stringify(
        await Promise.resolve()
          .then(progress)
          .catch((e) => ((last = e), seen)),
      );
      if (now !== seen) [seen, movedAt] = [now, Date.now()];
      else if (Date.now() - movedAt > stallMs)
        throw why(`no progress for ${stallMs} ms (stuck at ${now}, after ${Date.now() - started} ms)`);
    }
    if (Date.now() > run.deadline - MARGIN_MS)
      throw why(`its test's time ran out after ${Date.now() - started} ms${seen ? ` (progress: ${seen})` : ''}`);
    await new Promise((r) => setTimeout(r, every));
  }
}
