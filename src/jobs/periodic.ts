/**
 * The worker's periodic job upkeep (reconcilers, sweeps): each task runs every `everyMs`, never two runs of one
 * task at once; a failure is logged, never thrown, and the next tick tries again. Stopping waits for a run in
 * flight so a clean shutdown never cuts a repair in half.
 */
export interface PeriodicTask {
  /** Named in the log line of a failed run. */
  name: string;
  everyMs: number;
  run: () => Promise<unknown>;
}

export function runPeriodic(task: PeriodicTask, onError: (name: string, e: unknown) => void): () => Promise<void> {
  let running: Promise<unknown> | null = null;
  const timer = setInterval(() => {
    if (running) return;
    running = task
      .run()
      .catch((e: unknown) => onError(task.name, e))
      .finally(() => {
        running = null;
      });
  }, task.everyMs);
  timer.unref();
  return async () => {
    clearInterval(timer);
    await running;
  };
}
