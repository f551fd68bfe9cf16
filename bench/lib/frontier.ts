import type { LoadResult } from './load';
import type { LevelResult } from './streams';
import { levelHolds, REQUIRE_CONCURRENT } from './streams';
import { markdownTable, textTable, type Cell } from './report';

/**
 * The bench's issue-40 tables: the throughput frontier from one concurrency sweep, streams sustained, and one
 * against two API processes. Pure functions of what run.ts measured; no timing here.
 */

export const FRONTIER_MS = [1, 5, 10, 50];

export interface FrontierPoint {
  rps: number;
  connections: number;
}

/**
 * For each p99 bound: the most req/s among the sweep's levels whose p99 (µs, per response) is under it and which
 * served without errors; null when no level was.
 */
export function frontier(sweep: LoadResult[], boundsMs = FRONTIER_MS): (FrontierPoint | null)[] {
  return boundsMs.map((b) => {
    let best: FrontierPoint | null = null;
    for (const l of sweep)
      if (l.failed === 0 && l.ok > 0 && l.p99Us < b * 1000 && (!best || l.rps > best.rps))
        best = { rps: l.rps, connections: l.connections };
    return best;
  });
}

const f0 = (n: number | undefined) =>
  n === undefined || !Number.isFinite(n) ? '-' : Math.round(n).toLocaleString('en-US');
const f1 = (n: number | undefined) => (n === undefined || !Number.isFinite(n) ? '-' : n.toFixed(1));
const f2 = (n: number | undefined) => (n === undefined || !Number.isFinite(n) ? '-' : n.toFixed(2));
const signed = (n: number | undefined, digits = 0) =>
  n === undefined || !Number.isFinite(n) ? '-' : (n >= 0 ? '+' : '') + n.toFixed(digits);

export interface Rendered {
  text: string;
  markdown: string;
}
const both = (title: string, header: string[], rows: string[][], note = ''): Rendered => ({
  text: `\n== ${title} ==\n` + textTable(header, rows) + (note ? `\n${note}` : ''),
  markdown: `\n### ${title}\n\n` + markdownTable(header, rows) + (note ? `\n\n${note}` : ''),
});

/** Per workload: each target's frontier, and the sweep itself (req/s and p99 per level). */
export function renderFrontier(workload: string, sweeps: { target: string; sweep: LoadResult[] }[]): Rendered {
  const levels = [...new Set(sweeps.flatMap((s) => s.sweep.map((l) => l.connections)))].sort((a, b) => a - b);
  const header = [
    'target',
    ...FRONTIER_MS.map((b) => `req/s p99 < ${b} ms`),
    ...levels.map((c) => `c=${c} req/s / p99 µs`),
  ];
  const rows = sweeps.map(({ target, sweep }) => [
    target,
    ...frontier(sweep).map((p) => (p ? `${f0(p.rps)} (c=${p.connections})` : 'none')),
    ...levels.map((c) => {
      const l = sweep.find((x) => x.connections === c);
      return l ? `${f0(l.rps)} / ${f0(l.p99Us)}${l.failed ? ` (${l.failed} failed)` : ''}` : '-';
    }),
  ]);
  return both(`throughput frontier, ${workload} (one sweep)`, header, rows);
}

/** Everything the streams-sustained phase measured for one target. */
export interface StreamTarget {
  target: string;
  levels: (LevelResult & {
    cpuMs: number;
    upstreamCpuMs: number;
    rssBeforeMb: number;
    rssPeakMb: number;
    /** The whole machine's CPU busy over the level, % of all cores (other tenants included). */
    machineBusyPct: number;
    /** The target's event loop held up over the level (its worst process; null: not a bench IPC target). */
    loopDelay: { p99Ms: number; maxMs: number; gcs?: number; majorGcs?: number; gcMaxMs?: number } | null;
  })[];
  idleRssMb: number;
  recoveredRssMb: number | null;
  /** Streams the gateway counted as served with 200 during the phase (gateway targets only). */
  served200?: number;
}

export interface StreamSummary {
  target: string;
  /** The highest level that held (0: none). */
  sustained: number;
  /** The first level that did not hold, if one was run. */
  failedAt: number | null;
  /** Direct (the upstream alone, same client) failed at this level or below: the rig, not the target, bounds it. */
  rigLimited: boolean;
}

export function summariseStreams(all: StreamTarget[]): StreamSummary[] {
  const firstFail = (s: StreamTarget) => s.levels.find((l) => !levelHolds(l))?.streams ?? null;
  const direct = all.find((s) => s.target === 'direct');
  const directFail = direct ? firstFail(direct) : null;
  return all.map((s) => {
    const failedAt = firstFail(s);
    const held = s.levels.filter((l) => levelHolds(l) && (failedAt === null || l.streams < failedAt));
    return {
      target: s.target,
      sustained: held.length ? Math.max(...held.map((l) => l.streams)) : 0,
      failedAt,
      rigLimited: directFail !== null && (failedAt === null || failedAt >= directFail),
    };
  });
}

export function renderStreams(all: StreamTarget[], maxLevel: number): { rendered: Rendered; summary: StreamSummary[] } {
  const summary = summariseStreams(all);
  const direct = all.find((s) => s.target === 'direct');
  const ref = all[0]?.levels[0]?.streams;
  const refOf = (s: StreamTarget) => s.levels.find((l) => l.streams === ref);
  const d = direct && refOf(direct);
  const directFail = summary.find((s) => s.target === 'direct')?.failedAt ?? null;
  const header = [
    'target',
    'streams sustained',
    `added TTFD p50/p99 ms (${ref})`,
    `added inter-delta p99 ms (${ref})`,
    'RSS idle / steady / recovered MB',
    'CPU % of a core per 1,000 streams',
    'MB per 1,000 streams',
  ];
  const rows = all.map((s) => {
    const sum = summary.find((x) => x.target === s.target)!;
    const r = refOf(s);
    const top = s.levels.find((l) => l.streams === sum.sustained);
    let figure = sum.sustained ? sum.sustained.toLocaleString('en-US') : `< ${ref}`;
    if (sum.failedAt === null && sum.sustained >= maxLevel) figure = `>= ${figure} (highest level run)`;
    else if (sum.failedAt !== null) {
      const f = s.levels.find((l) => l.streams === sum.failedAt)!;
      const n = f.streams.toLocaleString('en-US');
      const once = f.peakConcurrent.toLocaleString('en-US');
      figure += ` (at ${n}: ${f.held.toLocaleString('en-US')} held, ${once} at once)`;
    }
    if (sum.rigLimited && s.target !== 'direct') figure += '; rig-limited';
    const cores = top ? top.cpuMs / top.wallMs : NaN;
    return [
      s.target,
      figure,
      s.target === 'direct'
        ? `(baseline ${f1(r?.ttfdP50Ms)} / ${f1(r?.ttfdP99Ms)})`
        : r && d
          ? `${signed(r.ttfdP50Ms - d.ttfdP50Ms, 1)} / ${signed(r.ttfdP99Ms - d.ttfdP99Ms, 1)}`
          : '-',
      s.target === 'direct' ? `(baseline ${f1(r?.gapP99Ms)})` : r && d ? signed(r.gapP99Ms - d.gapP99Ms, 1) : '-',
      `${f0(s.idleRssMb)} / ${f0(top?.rssPeakMb)} / ${f0(s.recoveredRssMb ?? undefined)}`,
      top ? f1((cores * 100 * 1000) / top.streams) : '-',
      top ? f1(((top.rssPeakMb - top.rssBeforeMb) * 1000) / top.streams) : '-',
    ];
  });
  const note = [
    `A level holds when >= 99.9 % of its streams hold (200, every event, [DONE], no gap > 200 ms between events)` +
      (REQUIRE_CONCURRENT
        ? ` and at least as many were delivering at one moment ("peak concurrent"; a target that queues streams, ` +
          `e.g. behind an upstream pool of 256 connections, has not sustained them).`
        : ` (BENCH_STREAMS_REQUIRE_CONCURRENT=0: the gap rule alone; "peak concurrent" shows any queuing).`),
    directFail !== null
      ? `Rig limit: direct (the upstream alone, same client) did not hold at ${directFail.toLocaleString('en-US')}: ` +
        `from that level on the load generator and the upstream on the same cores are the limit, not the target ` +
        `("rig-limited").`
      : `Direct held every level run: the rig was not the limit up to ${maxLevel.toLocaleString('en-US')}.`,
    `Machine busy % (every core, /proc/stat) near 100 with the target, upstream and load generator using ` +
      `little of it means other work on the machine, not the rig or the target, decided the level.`,
    `Event-loop delay: perf_hooks.monitorEventLoopDelay in the target's processes over the level (direct: the ` +
      `emulator's): a max near 200 ms is a stall of the target (GC, a burst of stream start-up work) or, on a ` +
      `busy machine, time its process waited for a core.`,
    `Steady RSS and the per-1,000 figures are taken at each target's highest level held (CPU: the target's ` +
      `process tree over that level's wall time; MB: its RSS peak during the level over its RSS just before).`,
  ].join('\n');
  const levelHeader = [
    'streams',
    'target',
    'held',
    'peak concurrent',
    'TTFD p50/p99 ms',
    'inter-delta p50/p99/max ms',
    'target CPU cores',
    'upstream CPU cores',
    'load generator CPU cores',
    'machine busy %',
    'target event-loop delay p99/max ms',
    'target GCs (major), longest ms',
    'why not held',
  ];
  const levelRows: string[][] = [];
  const levels = [...new Set(all.flatMap((s) => s.levels.map((l) => l.streams)))].sort((a, b) => a - b);
  for (const n of levels)
    for (const s of all) {
      const l = s.levels.find((x) => x.streams === n);
      if (!l) continue;
      levelRows.push([
        n.toLocaleString('en-US'),
        s.target,
        `${l.held.toLocaleString('en-US')}${levelHolds(l) ? '' : ' (not held)'}`,
        l.peakConcurrent.toLocaleString('en-US'),
        `${f1(l.ttfdP50Ms)} / ${f1(l.ttfdP99Ms)}`,
        `${f1(l.gapP50Ms)} / ${f1(l.gapP99Ms)} / ${f1(l.maxGapMs)}`,
        f2(l.cpuMs / l.wallMs),
        f2(l.upstreamCpuMs / l.wallMs),
        f2(l.clientCpuMs / l.wallMs),
        f0(l.machineBusyPct),
        l.loopDelay ? `${f1(l.loopDelay.p99Ms)} / ${f1(l.loopDelay.maxMs)}` : '-',
        l.loopDelay?.gcs !== undefined
          ? `${l.loopDelay.gcs} (${l.loopDelay.majorGcs}), ${f1(l.loopDelay.gcMaxMs)}`
          : '-',
        [
          ...Object.entries(l.failures).map(([k, v]) => `${v}x ${k}`),
          ...(REQUIRE_CONCURRENT && l.peakConcurrent < Math.ceil(l.streams * 0.999)
            ? [`queued: ${l.peakConcurrent.toLocaleString('en-US')} at once`]
            : []),
        ].join(', '),
      ]);
    }
  const a = both('streams sustained (64 deltas 20 ms apart, opened at once)', header, rows, note);
  const b = both('streams sustained, every level', levelHeader, levelRows);
  return { rendered: { text: a.text + '\n' + b.text, markdown: a.markdown + '\n' + b.markdown }, summary };
}

/** One cell's figures for the 1-vs-2-process comparison. */
export interface ProcCell {
  rps: number;
  cpuCores: number;
  upstreamCores: number;
  clientCores: number;
  machineBusyPct: number;
}

/**
 * gateway (one API process) beside gateway-2p (two, node:cluster): throughput at each measured level, the gain,
 * and where the machine's two cores went during each cell, which is what bounds the gain here.
 */
export function renderProcesses(
  rows: { label: string; one: ProcCell | undefined; two: ProcCell | undefined }[],
  streams: { one: StreamSummary | undefined; two: StreamSummary | undefined },
  cores: number,
): Rendered {
  const header = [
    'cell',
    'req/s 1 / 2 processes',
    'gain (2p / 1p)',
    'gateway CPU cores 1p / 2p',
    'upstream + load generator cores 1p / 2p',
    `machine busy % of ${cores} cores 1p / 2p`,
  ];
  const out = rows.map(({ label, one, two }) => [
    label,
    `${f0(one?.rps)} / ${f0(two?.rps)}`,
    one && two ? f2(two.rps / one.rps) : '-',
    `${f2(one?.cpuCores)} / ${f2(two?.cpuCores)}`,
    `${f2(one ? one.upstreamCores + one.clientCores : NaN)} / ${f2(two ? two.upstreamCores + two.clientCores : NaN)}`,
    `${f0(one?.machineBusyPct)} / ${f0(two?.machineBusyPct)}`,
  ]);
  if (streams.one || streams.two)
    out.push([
      'streams sustained',
      `${streams.one?.sustained ?? '-'} / ${streams.two?.sustained ?? '-'}`,
      streams.one?.sustained && streams.two ? f2(streams.two.sustained / streams.one.sustained) : '-',
      '',
      '',
      '',
    ]);
  const busy = rows.map((r) => r.one?.machineBusyPct).filter((x): x is number => x !== undefined);
  const measured = busy.length
    ? `In this run the machine was ${f0(Math.min(...busy))}-${f0(Math.max(...busy))} % busy during the ` +
      `one-process cells. `
    : '';
  const note =
    measured +
    `The gain is bounded by the machine: with ${cores} cores shared by the load generator (autocannon, this ` +
    `process), the upstream (emulator) and Postgres, a second API process only helps while cores are idle. Where ` +
    `the machine is near 100 % busy with one process, the second one takes CPU from the load generator and the ` +
    `upstream rather than adding capacity; the cluster primary also forwards each new connection to a worker (keep-` +
    `alive connections then stay on it, so c=N spreads N connections round-robin).`;
  return both('one vs two API processes (API_PROCESSES=2, node:cluster)', header, out, note);
}

/**
 * Where the c=1 tail comes from: beside each proxy's added p50/p99, its garbage collections and event-loop delay
 * over the same sequential requests. A p99 near the longest GC pause or loop stall points at them; requests/GC
 * says how often a request meets one.
 */
export function renderTail(cells: Cell[]): Rendered | null {
  const rows = cells
    .filter((c) => c.seqLoop && c.seq)
    .map((c) => {
      const l = c.seqLoop!;
      const n = c.seq!.n;
      return [
        `${c.workload} ${c.target}`,
        `${signed(c.addedP50Us)} / ${signed(c.addedP99Us)}`,
        `${l.gcs} (${l.majorGcs} major)`,
        l.gcs ? f0(n / l.gcs) : '-',
        `${f1(l.gcTotalMs)} / ${f1(l.gcMaxMs)}`,
        `${f1(l.p99Ms)} / ${f1(l.maxMs)}`,
      ];
    });
  if (!rows.length) return null;
  return both(
    'c=1 tail: GC and event-loop stalls over the sequential requests',
    [
      'workload, target',
      'added p50 / p99 µs',
      'GCs',
      'requests per GC',
      'GC total / longest pause ms',
      'event-loop delay p99 / max ms',
    ],
    rows,
    "Over the target's c=1 requests (paired with direct ones, so the window is about twice their time). " +
      'Event-loop delay has a 5 ms timer resolution: it shows stalls, not the µs of a single request.',
  );
}

/**
 * Where the c=1 tail comes from, cause by cause (bench/lib/tailCauses.ts): how many of the slowest 1 % of each
 * proxy's c=1 requests overlapped each cause, against the share of all its requests that did.
 */
export function renderTailCauses(cells: Cell[]): Rendered | null {
  const rows: string[][] = [];
  for (const c of cells) {
    const t = c.tailCauses;
    if (!t) continue;
    const pct = (k: number, n: number) => `${Math.round((100 * k) / n)} %`;
    const head = `${c.workload} ${c.target}`;
    rows.push([head, `tail: slowest ${t.tail} of ${f0(t.requests)} (from ${f0(t.tailFromUs)} µs)`, '', '', '']);
    for (const k of t.causes)
      if (k.tail > 0 || k.all > 0)
        rows.push([
          '',
          k.cause,
          `${k.tail} (${pct(k.tail, t.tail)})`,
          pct(k.all, t.requests),
          k.spans ? `${f0(k.spans)} × ${k.meanMs.toFixed(2)} ms` : '-',
        ]);
    rows.push(['', 'none of these', `${t.unexplained} (${pct(t.unexplained, t.tail)})`, '', '']);
  }
  if (!rows.length) return null;
  return both(
    'c=1 tail: what the slowest 1 % of requests overlapped',
    ['workload, target', 'cause', 'tail requests that met it', 'all requests that met it', 'times × mean length'],
    rows,
    "A request meets a cause if it ran while the cause did (the target's GC pauses and published off-path work, " +
      "in epoch time; the load generator's GCs) or if the direct request paired with it was among the slowest " +
      '2 % too. A cause the tail meets much more often than all requests do is where the tail comes from.',
  );
}
