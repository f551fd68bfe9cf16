import autocannon from 'autocannon';
import { performance, PerformanceObserver } from 'node:perf_hooks';
import { Client } from 'undici';
import type { WorkSpan } from '../../src/observability/offPathWork';

/** One request shape sent to a target: the path and headers differ per target, the JSON body per workload. */
export interface RequestSpec {
  url: string;
  headers: Record<string, string>;
  body: string;
}

export interface LoadResult {
  connections: number;
  seconds: number;
  ok: number;
  failed: number;
  /** Status codes other than 2xx, and transport errors, for the report. */
  problems: string;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  /** The same percentiles in µs, from each 2xx response's own time (autocannon's histogram keeps whole ms). */
  p50Us: number;
  p99Us: number;
}

/** Closed-loop load at a fixed number of keep-alive connections for `seconds` (autocannon). */
export async function load(spec: RequestSpec, connections: number, seconds: number): Promise<LoadResult> {
  const inst = autocannon({
    url: spec.url,
    connections,
    duration: seconds,
    pipelining: 1,
    timeout: 30,
    method: 'POST',
    headers: spec.headers,
    body: spec.body,
  });
  // autocannon records whole milliseconds in its histogram, too coarse for a p99 under 1 ms; every response's
  // time (fractional ms, from process.hrtime) comes with its 'response' event.
  const times: number[] = [];
  inst.on('response', (_c, status, _b, ms) => {
    if (status >= 200 && status < 300) times.push(ms);
  });
  const r = await inst;
  const us = Float64Array.from(times, (ms) => ms * 1000).sort();
  const ok = r['2xx'];
  const bad = Object.entries(r.statusCodeStats)
    .filter(([s]) => !s.startsWith('2'))
    .map(([s, v]) => `${v.count}x${s}`);
  if (r.errors) bad.push(`${r.errors} errors`);
  if (r.timeouts) bad.push(`${r.timeouts} timeouts`);
  return {
    connections,
    seconds: r.duration,
    ok,
    failed: r.non2xx + r.errors,
    problems: bad.join(' '),
    rps: ok / r.duration,
    p50Ms: r.latency.p50,
    p99Ms: r.latency.p99,
    p50Us: percentileOf(us, 50),
    p99Us: percentileOf(us, 99),
  };
}

/** Nanoseconds for one request on a keep-alive connection: to the first body byte (streams) or the last. */
async function timeOne(
  client: Client,
  path: string,
  spec: RequestSpec,
  firstByte: boolean,
): Promise<{ ns: number; status: number; startMs: number }> {
  const startMs = performance.timeOrigin + performance.now();
  const t0 = process.hrtime.bigint();
  const res = await client.request({ method: 'POST', path, headers: spec.headers, body: spec.body });
  let first: bigint | null = null;
  for await (const _chunk of res.body) {
    if (first === null) first = process.hrtime.bigint();
  }
  const end = process.hrtime.bigint();
  return { ns: Number((firstByte ? (first ?? end) : end) - t0), status: res.statusCode, startMs };
}

export interface SeqResult {
  n: number;
  p50Us: number;
  p99Us: number;
  errors: number;
}
export interface PairedResult {
  direct: SeqResult;
  target: SeqResult;
  addedP50Us: number;
  addedP99Us: number;
  /** Each measured pair: the target request's start (epoch ms) and time, and its direct neighbour's time. */
  pairs: SeqPair[];
  /** The load generator's own garbage collections over the requests (they delay what it measures). */
  clientGcs: WorkSpan[];
}
export interface SeqPair {
  startMs: number;
  us: number;
  directUs: number;
}

export function percentileOf(sorted: ArrayLike<number>, p: number): number {
  if (!sorted.length) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}

function summarise(ns: number[], errors: number): SeqResult {
  const us = ns.map((x) => x / 1000).sort((a, b) => a - b);
  return { n: us.length, p50Us: percentileOf(us, 50), p99Us: percentileOf(us, 99), errors };
}

/**
 * Added latency at concurrency 1: `n` sequential requests to the target, each paired with one to the upstream
 * directly (alternating, so drift and noisy neighbours hit both alike), one keep-alive connection each.
 * Added = target percentile - direct percentile, in microseconds.
 */
export async function pairedSequential(
  direct: RequestSpec,
  target: RequestSpec,
  n: number,
  firstByte: boolean,
): Promise<PairedResult> {
  const open = (spec: RequestSpec) => {
    const u = new URL(spec.url);
    return { client: new Client(u.origin, { pipelining: 1, keepAliveTimeout: 60_000 }), path: u.pathname + u.search };
  };
  const d = open(direct);
  const t = open(target);
  const dNs: number[] = [];
  const tNs: number[] = [];
  let dErr = 0;
  let tErr = 0;
  const pairs: SeqPair[] = [];
  const clientGcs: WorkSpan[] = [];
  const gcs = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      const startMs = performance.timeOrigin + e.startTime;
      clientGcs.push({ name: 'GC in the load generator', startMs, endMs: startMs + e.duration });
    }
  });
  try {
    const warm = Math.min(200, Math.ceil(n / 5));
    for (let i = 0; i < warm + n; i++) {
      if (i === warm) gcs.observe({ entryTypes: ['gc'] });
      const a = await timeOne(d.client, d.path, direct, firstByte);
      const b = await timeOne(t.client, t.path, target, firstByte);
      if (i < warm) continue;
      if (a.status === 200) dNs.push(a.ns);
      else dErr++;
      if (b.status === 200) tNs.push(b.ns);
      else tErr++;
      if (a.status === 200 && b.status === 200)
        pairs.push({ startMs: b.startMs, us: b.ns / 1000, directUs: a.ns / 1000 });
    }
  } finally {
    gcs.disconnect();
    await Promise.all([d.client.close(), t.client.close()]);
  }
  const ds = summarise(dNs, dErr);
  const ts = summarise(tNs, tErr);
  return {
    direct: ds,
    target: ts,
    addedP50Us: ts.p50Us - ds.p50Us,
    addedP99Us: ts.p99Us - ds.p99Us,
    pairs,
    clientGcs,
  };
}

/** Sequential latency of one target on its own (the direct row). */
export async function sequential(spec: RequestSpec, n: number, firstByte: boolean): Promise<SeqResult> {
  const u = new URL(spec.url);
  const client = new Client(u.origin, { pipelining: 1, keepAliveTimeout: 60_000 });
  const ns: number[] = [];
  let errors = 0;
  try {
    for (let i = 0; i < n + Math.min(200, Math.ceil(n / 5)); i++) {
      const r = await timeOne(client, u.pathname, spec, firstByte);
      if (i < Math.min(200, Math.ceil(n / 5))) continue;
      if (r.status === 200) ns.push(r.ns);
      else errors++;
    }
  } finally {
    await client.close();
  }
  return summarise(ns, errors);
}
