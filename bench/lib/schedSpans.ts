import fs from 'node:fs';
import { performance } from 'node:perf_hooks';
import type { WorkSpan } from '../../src/observability/offPathWork';

/**
 * What the scheduler did while the c=1 requests ran, as spans for bench/lib/tailCauses.ts: every `everyMs` it reads
 * /proc/<pid>/schedstat (nanoseconds on a CPU and waiting for one, per thread; exact, unlike /proc/<pid>/stat's
 * 10 ms ticks) of the target's main thread, the upstream's, and every local Postgres process. A window in which
 * the target or the upstream waited at least `waitMs` for a core, or Postgres ran at least `pgMs`, becomes a span:
 * "the machine" and "Postgres" as causes, measured rather than left over. About 10 small reads per tick.
 */
export interface SchedSampler {
  stop(): WorkSpan[];
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

export function sampleSched(
  targetPid: number,
  upstreamPid: number,
  { everyMs = 5, waitMs = 0.5, pgMs = 1 } = {},
): SchedSampler {
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
  return {
    stop() {
      clearInterval(timer);
      return spans;
    },
  };
}
