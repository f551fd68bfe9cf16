import fs from 'node:fs';
import { performance } from 'node:perf_hooks';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import type { WorkSpan } from '../../src/observability/offPathWork';

/**
 * What the scheduler did while the c=1 requests ran, as spans for bench/lib/tailCauses.ts: every `everyMs` it reads
 * /proc/<pid>/schedstat (nanoseconds on a CPU and waiting for one, per thread; exact, unlike /proc/<pid>/stat's
 * 10 ms ticks) of the target's main thread, the upstream's, and every local Postgres process. A window in which
 * the target or the upstream waited at least `waitMs` for a core, or Postgres ran at least `pgMs`, becomes a span:
 * "the machine" and "Postgres" as causes, measured rather than left over. About 10 small reads per tick, in a
 * worker thread.
 */
export interface SchedSampler {
  stop(): Promise<WorkSpan[]>;
}

const readNs = (file: string): [number, number] | null => {
  try {
    const [run, wait] = fs.readFileSync(file, 'utf8').split(' ');
    return [Number(run), Number(wait)];
  } catch {
    return null;
  }
};

function postgresPids(): number[] {
  const out: number[] = [];
  for (const d of fs.readdirSync('/proc')) {
    if (d.charCodeAt(0) < 48 || d.charCodeAt(0) > 57) continue;
    try {
      if (fs.readFileSync(`/proc/${d}/comm`, 'utf8').trim() === 'postgres') out.push(Number(d));
    } catch {
      /* gone meanwhile */
    }
  }
  return out;
}

/**
 * Samples in a worker thread of its own, so its reads never hold up the load generator's event loop (which times
 * the requests); the spans come back when it stops.
 */
export function sampleSched(targetPid: number, upstreamPid: number, opts: SchedOptions = {}): SchedSampler {
  const worker = new Worker(__filename, { workerData: { targetPid, upstreamPid, opts } });
  worker.unref();
  return {
    stop: () =>
      new Promise<WorkSpan[]>((resolve) => {
        worker.once('message', (spans: WorkSpan[]) => {
          void worker.terminate();
          resolve(spans);
        });
        worker.once('error', () => resolve([]));
        worker.postMessage('stop');
      }),
  };
}

interface SchedOptions {
  everyMs?: number;
  waitMs?: number;
  pgMs?: number;
}

function sampleHere(
  targetPid: number,
  upstreamPid: number,
  { everyMs = 5, waitMs = 0.5, pgMs = 1 }: SchedOptions,
): () => WorkSpan[] {
  const spans: WorkSpan[] = [];
  const files = {
    target: `/proc/${targetPid}/task/${targetPid}/schedstat`,
    upstream: `/proc/${upstreamPid}/task/${upstreamPid}/schedstat`,
    pg: postgresPids().map((p) => `/proc/${p}/schedstat`),
  };
  const read = () => ({
    at: performance.timeOrigin + performance.now(),
    target: readNs(files.target),
    upstream: readNs(files.upstream),
    pgRun: files.pg.reduce((a, f) => a + (readNs(f)?.[0] ?? 0), 0),
  });
  let prev = read();
  const timer = setInterval(() => {
    const now = read();
    const span = (name: string) => spans.push({ name, startMs: prev.at, endMs: now.at });
    if (now.target && prev.target && now.target[1] - prev.target[1] >= waitMs * 1e6) span('target waited for a core');
    if (now.upstream && prev.upstream && now.upstream[1] - prev.upstream[1] >= waitMs * 1e6)
      span('upstream waited for a core');
    if (now.pgRun - prev.pgRun >= pgMs * 1e6) span('Postgres on a core');
    prev = now;
  }, everyMs);
  return () => {
    clearInterval(timer);
    return spans;
  };
}

if (!isMainThread && parentPort && workerData?.targetPid) {
  const port = parentPort;
  const { targetPid, upstreamPid, opts } = workerData as { targetPid: number; upstreamPid: number; opts: SchedOptions };
  const stop = sampleHere(targetPid, upstreamPid, opts);
  port.once('message', () => port.postMessage(stop()));
}
