import cluster, { type Worker } from 'node:cluster';
import os from 'node:os';
import { exitOnStopSignals } from './stopSignals';

/**
 * `API_PROCESSES`: how many API processes share the port. Node 20 cannot share a port between unrelated processes
 * (no SO_REUSEPORT in net), so several processes run under node:cluster: the primary accepts connections and hands
 * them round-robin to its workers, each a full API process (its own pools, credit leases and caches). Money and
 * limits are already exact across processes (credit leases in Postgres, rate limits in Redis), which is why more
 * than one process needs REDIS_URL: an in-process rate window would let each process grant the whole limit.
 */
export function apiProcessCount(value: string | undefined, cores = os.availableParallelism()): number {
  if (value === undefined || value === '' || value === '1') return 1;
  if (value === 'auto') return Math.max(1, cores);
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 256)
    throw new Error(`API_PROCESSES must be "auto" or a whole number from 1 to 256, not "${value}"`);
  return n;
}

export interface Stoppable {
  close(): Promise<void>;
}

interface Options {
  count: number;
  /** Starts one API process (in a cluster worker, or in this process when count is 1). */
  start: () => Promise<Stoppable>;
  log: (msg: string) => void;
  /** Called once every first-generation worker listens (the port they share). */
  onListening?: (port: number) => void;
  /** A worker that dies this soon after starting, this many times in a row, stops the whole group. */
  crashWindowMs?: number;
  maxQuickCrashes?: number;
}

/** One process: start it and stop it cleanly on SIGINT/SIGTERM (leases returned, logs flushed). */
async function runSingle(start: () => Promise<Stoppable>): Promise<void> {
  const api = await start();
  exitOnStopSignals(() => api.close());
}

/**
 * Runs `count` API processes. The primary only forks, replaces a worker that died, and on SIGINT/SIGTERM asks
 * every worker to stop cleanly and exits when they have. A worker that keeps dying at start-up (a bad config, a
 * port taken) stops the group rather than forking forever.
 */
export async function runApiProcesses(opts: Options): Promise<void> {
  if (opts.count <= 1) return runSingle(opts.start);
  if (cluster.isWorker) return runSingle(opts.start);

  const crashWindowMs = opts.crashWindowMs ?? 10_000;
  const maxQuickCrashes = opts.maxQuickCrashes ?? 3;
  let stopping = false;
  let quickCrashes = 0;
  const startedAt = new Map<number, number>();

  const fork = (): Worker => {
    const w = cluster.fork();
    startedAt.set(w.id, Date.now());
    return w;
  };
  const stopAll = (code: number) => {
    if (stopping) return;
    stopping = true;
    const workers = Object.values(cluster.workers ?? {}).filter((w): w is Worker => !!w);
    if (workers.length === 0) process.exit(code);
    for (const w of workers) w.process.kill('SIGTERM');
    cluster.on('exit', () => {
      if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(code);
    });
  };

  cluster.on('exit', (w, codeOrNull, signal) => {
    if (stopping) return;
    const lived = Date.now() - (startedAt.get(w.id) ?? 0);
    startedAt.delete(w.id);
    quickCrashes = lived < crashWindowMs ? quickCrashes + 1 : 0;
    opts.log(`API process ${w.process.pid} exited (${signal ?? `code ${codeOrNull}`}) after ${lived} ms`);
    if (quickCrashes >= maxQuickCrashes) {
      opts.log(`API processes keep dying at start-up (${quickCrashes} in a row): stopping`);
      stopAll(1);
      return;
    }
    fork();
  });
  let listening = 0;
  cluster.on('listening', (_w, address) => {
    if (++listening === opts.count) opts.onListening?.(address.port);
  });
  // `on`, not `once`: a Ctrl-C often arrives twice (terminal and npm); stopAll acts on the first only.
  process.on('SIGINT', () => stopAll(0));
  process.on('SIGTERM', () => stopAll(0));
  for (let i = 0; i < opts.count; i++) fork();
  opts.log(`API: ${opts.count} processes sharing one port (primary ${process.pid})`);
}
