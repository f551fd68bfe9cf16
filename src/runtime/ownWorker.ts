import type { Worker } from '@temporalio/worker';

/**
 * A Temporal worker of its own (task queue, activity slots, database connections, sockets) beside the jobs' worker
 * in the same process, as webhook deliveries and background runs have: run once; closed (once), it shuts down, waits
 * for its activities to end (within its shutdown grace), then frees what it was given. What it was given is freed
 * as well when the worker cannot be created.
 */
export interface OwnWorker {
  run(): Promise<void>;
  close(): Promise<void>;
}

export async function ownWorker(create: () => Promise<Worker>, free: (() => Promise<unknown>)[]): Promise<OwnWorker> {
  const freeAll = async () => {
    for (const f of free) await f().catch(() => undefined);
  };
  let worker: Worker;
  try {
    worker = await create();
  } catch (e) {
    await freeAll();
    throw e;
  }
  let running: Promise<void> | null = null;
  let closed: Promise<void> | null = null;
  return {
    run() {
      running ??= worker.run();
      return running;
    },
    // Once: a process may start the stop early (so a shutdown grace runs beside the rest of its stop) and call it
    // again from its clean-up list; what it was given is freed once, after the worker stopped (its activities ended).
    close() {
      closed ??= (async () => {
        if (worker.getState() === 'RUNNING') worker.shutdown();
        await running?.catch(() => undefined);
        await freeAll();
      })();
      return closed;
    },
  };
}
