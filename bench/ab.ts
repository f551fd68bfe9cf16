import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { projectRoot } from '../src/projectRoot';
import {
  apiNodeFlags,
  cpuMs,
  distDir,
  forkTarget,
  peakRssMb,
  postgresCpuMs,
  resetPeakRss,
  type Target,
} from './lib/proc';
import { createBenchDb, type BenchDb } from './lib/db';
import { load, type LoadResult } from './lib/load';
import { createPool } from '../src/db/pool';
import { setKeyLimits } from '../src/limits/keyLimits';

/**
 * A/B of two builds of the gateway in one run: `node dist/bench/ab.js <baseline dist dir> [workload] [connections]`.
 * Both gateways run side by side (each its own process and bench database) in front of one emulated upstream, and
 * are loaded in alternating cells, so whatever else the machine is doing falls on both alike. Prints each one's CPU
 * per request (its own, and local Postgres's over its cells) and median throughput, and the ratios. On this
 * shared machine a full `npm run bench` moves by 10-20 % between runs; this pairing resolves changes of a few
 * percent. A baseline build: `git worktree add /tmp/base <ref> && ln -s "$PWD/node_modules" /tmp/base/ &&
 * (cd /tmp/base && npx tsc -p tsconfig.json)`, then pass /tmp/base/dist.
 *
 * `node dist/bench/ab.js --limits [workload] [connections]` instead compares this build with itself: the baseline
 * key has no limits (no Redis), the other has RPM, TPM and a daily budget set (all far above what the run uses) and
 * its gateway keeps the rate-limit windows in Redis (BENCH_REDIS_URL, default redis://127.0.0.1:6379): the cost of
 * per-key limits per request, in CPU and, from extra c=1 cells, added latency.
 *
 * Each gateway runs with the Node flags of its own checkout's `npm run api` (memory settings are part of a build),
 * unless BENCH_AB_BASELINE_NODE_ARGS / BENCH_AB_NODE_ARGS give others; each side's peak RSS under the load is printed.
 *
 * BENCH_AB_ENV (`K=V K2=V2`) adds environment to this build's gateway only, e.g. OpenTelemetry settings to measure
 * tracing's cost against the same build without them; `OTEL_EXPORTER_OTLP_ENDPOINT=sink` points it at an OTLP/HTTP
 * receiver in this process that reads and drops every export (the exports' bytes are counted and printed).
 *
 * The rounds run in ABBA order, each round's c=1 cells (with --limits) right after its c=50 cells; the CPU ratio and
 * the added c=1 latency are printed per round and as a median with a bootstrap 90 % interval, quartiles and range.
 * The rounds are run by BENCH_AB_PAIRS pairs of gateway processes in turn, each pair started afresh (in the other
 * order than the one before, warmed and loaded first in that order): two processes of one build differ by more than
 * the rounds of one pair do (one pair of the same build against itself measured 0.71 with an interval of 0.64-0.83,
 * another 1.32, 1.16-1.44), so one pair's interval says nothing of the build. The interval is a bootstrap over
 * pairs, then rounds within them, and each pair's median ratio is printed; compare a run with the same build on
 * both sides (pass this build's own dist) before reading a few percent as a change.
 *
 * BENCH_AB_TOGETHER=1 loads both sides at the same time instead (togetherRound).
 *
 * On a machine other programs load, a process's CPU per request moves with their load second by second (one
 * cell 85 µs at 6,000 req/s, the next 435 µs at 600 req/s); together, both sides see the same seconds.
 *
 * BENCH_AB_DIST=<dist dir> measures that build in place of this one (two older builds, e.g. while bisecting).
 *
 * Environment: BENCH_AB_PAIRS (4), BENCH_AB_ROUNDS (4 per pair), BENCH_SECONDS (3), BENCH_WARMUP_SECONDS (2),
 * BENCH_REDIS_URL, BENCH_LIMITS (`all`, `rate`: RPM and TPM only, `budget`: the daily budget only),
 * BENCH_AB_BASELINE_NODE_ARGS, BENCH_AB_NODE_ARGS, BENCH_AB_DIST.
 */

const env = process.env;
const PAIRS = Number(env.BENCH_AB_PAIRS ?? 4);
const ROUNDS = Number(env.BENCH_AB_ROUNDS ?? 4);
const SECONDS = Number(env.BENCH_SECONDS ?? 3);
const WARMUP = Number(env.BENCH_WARMUP_SECONDS ?? 2);
const TOGETHER = env.BENCH_AB_TOGETHER === '1';
const messages = [
  { role: 'system', content: 'You are a helpful assistant.' },
  { role: 'user', content: 'Write one short sentence about the sea.' },
];
const WORKLOADS: Record<string, { path: string; body: object }> = {
  chat: { path: '/chat/completions', body: { model: 'gpt-4o-mini', max_tokens: 256, messages } },
  'chat-stream': { path: '/chat/completions', body: { model: 'gpt-4o-mini', max_tokens: 256, stream: true, messages } },
  embeddings: {
    path: '/embeddings',
    body: { model: 'text-embedding-3-small', input: 'The quick brown fox jumps over the lazy dog.' },
  },
};

interface Side {
  name: string;
  flags: string[];
  /** The side's gateway process of the current pair. */
  target: Target | null;
  start(): Promise<Target>;
  peakRssMb: number;
  bdb: BenchDb;
  key: string;
  cpu: number;
  db: number;
  ok: number;
  runs: LoadResult[];
  single: LoadResult[];
  /** CPU per request of each of its cells, µs. */
  cellCpu: number[];
  /** Mean latency of each of its c=1 cells, µs. */
  cellLatency: number[];
}

/** A side's Node flags: given in the environment, else its checkout's `npm run api` flags. */
const nodeFlags = (given: string | undefined, dist: string): string[] =>
  given !== undefined ? given.split(' ').filter(Boolean) : apiNodeFlags(path.resolve(dist, '..'));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const median = (xs: number[]) => quantile(xs, 0.5);
/** The q-quantile of xs (nearest rank; the median of an even count is the mean of the middle two). */
function quantile(xs: number[], q: number): number {
  const a = [...xs].sort((x, y) => x - y);
  if (q === 0.5 && a.length % 2 === 0) return (a[a.length / 2 - 1] + a[a.length / 2]) / 2;
  return a[Math.min(a.length - 1, Math.max(0, Math.round(q * (a.length - 1))))];
}

/**
 * A 90 % interval of the median of xs by bootstrap (2,000 resamples, a fixed seed): how far the machine's noise
 * could move the figure. Reported with the quartiles, so a bound is judged on the spread, not one number.
 *
 * xs holds `group` rounds of each pair of processes in turn. Two processes of one build differ by more than their
 * rounds do (measured on this machine, the same build against itself: 0.71, 0.79 and 1.32 in three runs of one pair
 * each, every one with an interval of about ±10 %), so the resampling is by pair first and then by round within
 * each pair drawn: the interval holds the processes' spread, not only the rounds'.
 */
function bootstrapMedian(xs: number[], group = xs.length): [number, number] {
  let seed = 12345;
  const rnd = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) >>> 8) / 2 ** 24;
  const pick = <T>(a: T[]): T => a[Math.floor(rnd() * a.length)];
  const groups: number[][] = [];
  for (let i = 0; i < xs.length; i += group) groups.push(xs.slice(i, i + group));
  const ms: number[] = [];
  for (let i = 0; i < 2000; i++) {
    const drawn = groups.flatMap(() => {
      const g = pick(groups);
      return g.map(() => pick(g));
    });
    ms.push(median(drawn));
  }
  return [quantile(ms, 0.05), quantile(ms, 0.95)];
}

function spread(xs: number[], fmt: (x: number) => string, group = xs.length): string {
  const [lo, hi] = bootstrapMedian(xs, group);
  const pairs = xs.length / group;
  return (
    `median ${fmt(median(xs))} (90% interval ${fmt(lo)}-${fmt(hi)}; quartiles ${fmt(quantile(xs, 0.25))}-` +
    `${fmt(quantile(xs, 0.75))}; range ${fmt(Math.min(...xs))}-${fmt(Math.max(...xs))}; ${xs.length} rounds` +
    `${pairs > 1 ? ` of ${pairs} process pairs` : ''})`
  );
}

/** The medians of xs's groups of `group` (each pair of processes' own figure). */
const groupMedians = (xs: number[], group: number): number[] =>
  Array.from({ length: Math.ceil(xs.length / group) }, (_, i) => median(xs.slice(i * group, (i + 1) * group)));

/** A c=50 cell's figures, added to its side. */
function record(s: Side, r: LoadResult, cpu: number, db: number): void {
  s.cpu += cpu;
  s.cellCpu.push((1000 * cpu) / Math.max(1, r.ok));
  s.db += db;
  s.ok += r.ok;
  s.runs.push(r);
}

/**
 * BENCH_AB_TOGETHER: both sides loaded at the same time, each by its own connections, and each process's CPU read
 * over the same seconds: whatever else runs on the machine hits both at every instant, not just on average. Local
 * Postgres's CPU is shared and split by requests. The c=1 cells run together the same way.
 */
async function togetherRound(
  sides: Side[],
  spec: (s: Side) => { url: string; headers: Record<string, string>; body: string },
  connections: number,
  limits: boolean,
): Promise<void> {
  await sleep(300);
  const c0 = sides.map((s) => cpuMs(s.target!.pid));
  const d0 = postgresCpuMs();
  const rs = await Promise.all(sides.map((s) => load(spec(s), connections, SECONDS)));
  await sleep(300);
  const db = postgresCpuMs() - d0;
  const total = rs.reduce((t, r) => t + r.ok, 0);
  sides.forEach((s, i) => record(s, rs[i], cpuMs(s.target!.pid) - c0[i], (db * rs[i].ok) / Math.max(1, total)));
  if (!limits) return;
  const singles = await Promise.all(sides.map((s) => load(spec(s), 1, SECONDS)));
  sides.forEach((s, i) => {
    s.single.push(singles[i]);
    s.cellLatency.push(1_000_000 / Math.max(1e-9, singles[i].rps));
  });
}

async function main(): Promise<void> {
  const [baseline, workload = 'chat', conns = '50'] = process.argv.slice(2);
  const w = WORKLOADS[workload];
  if (!baseline || !w) {
    console.error(
      `usage: node dist/bench/ab.js <baseline dist dir>|--limits [${Object.keys(WORKLOADS).join('|')}] [connections]`,
    );
    process.exit(2);
  }
  const limits = baseline === '--limits';
  const thisBuild = path.resolve(env.BENCH_AB_DIST ?? path.resolve(distDir(), '..'));
  const builds: [string, string][] = limits
    ? [
        ['no limits', thisBuild],
        ['limits', thisBuild],
      ]
    : [
        ['baseline', path.resolve(baseline)],
        ['this build', thisBuild],
      ];
  const connections = Number(conns);
  const logs = path.join(projectRoot(), 'bench', 'results', 'logs');
  fs.mkdirSync(logs, { recursive: true });
  const extra = await sideEnv(env.BENCH_AB_ENV ?? '');
  const emulator = await forkTarget('emulator', path.join(distDir(), 'targets', 'emulator.js'), {
    logFile: path.join(logs, 'ab-emulator.log'),
  });
  const sides: Side[] = [];
  const stopAll = () => Promise.all(sides.filter((s) => s.target).map((s) => s.target!.stop()));
  try {
    for (const [name, dist] of builds) {
      const db = await createBenchDb(1_000_000_000_000);
      const limited = limits && name === 'limits';
      if (limited) await setBenchLimits(db);
      const redis = limited
        ? { REDIS_URL: env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379', REDIS_KEY_PREFIX: `gw-bench:${db.name}:` }
        : {};
      const flags = nodeFlags(name === 'baseline' ? env.BENCH_AB_BASELINE_NODE_ARGS : env.BENCH_AB_NODE_ARGS, dist);
      sides.push({
        name,
        flags,
        target: null,
        start: () =>
          forkTarget(name, path.join(dist, 'bench', 'targets', 'gateway.js'), {
            env: {
              DATABASE_URL: db.url,
              EMULATOR_URL: emulator.url,
              LOG_LEVEL: 'info',
              NODE_ENV: 'production',
              TEMPORAL_ADDRESS: 'off',
              ...redis,
              ...(name === builds[1][0] ? extra.env : {}),
            },
            execArgv: flags,
            logFile: path.join(logs, `ab-${name.replace(' ', '-')}.log`),
          }),
        bdb: db,
        key: db.key,
        cpu: 0,
        db: 0,
        ok: 0,
        peakRssMb: 0,
        runs: [],
        single: [],
        cellCpu: [],
        cellLatency: [],
      });
    }
    const spec = (s: Side) => ({
      url: `${s.target!.url}/v1${w.path}`,
      headers: { 'content-type': 'application/json', authorization: `Bearer ${s.key}` },
      body: JSON.stringify(w.body),
    });
    for (let pair = 0; pair < PAIRS; pair++) {
      // Each pair of processes is started, warmed and first loaded in the other order than the one before.
      const first = pair % 2 ? [...sides].reverse() : sides;
      for (const s of first) s.target = await s.start();
      for (const s of first) await load(spec(s), connections, WARMUP);
      for (const s of first) resetPeakRss(s.target!.pid); // the peak under this load, not at start-up
      // Rounds in ABBA order (A B, then B A, ...): each round's two cells run back to back, and whatever the machine
      // is doing meanwhile (other processes' load drifts over seconds) falls on A first as often as on B first. The
      // c=1 cells of a round follow its c=50 cells, in the same order.
      for (let round = 0; round < ROUNDS; round++) {
        const order = round % 2 ? [...first].reverse() : first;
        if (TOGETHER) await togetherRound(order, spec, connections, limits);
        else
          for (const s of order) {
            await sleep(300);
            const c0 = cpuMs(s.target!.pid);
            const d0 = postgresCpuMs();
            const r = await load(spec(s), connections, SECONDS);
            await sleep(300); // the billing flush of these requests lands in this cell
            record(s, r, cpuMs(s.target!.pid) - c0, postgresCpuMs() - d0);
          }
        if (limits && !TOGETHER)
          for (const s of order) {
            const r = await load(spec(s), 1, SECONDS);
            s.single.push(r);
            s.cellLatency.push(1_000_000 / Math.max(1e-9, r.rps));
          }
      }
      for (const s of sides) s.peakRssMb = Math.max(s.peakRssMb, peakRssMb(s.target!.pid));
      await stopAll();
      for (const s of sides) s.target = null;
    }
    for (const s of sides) {
      const cpuUs = ((1000 * s.cpu) / s.ok).toFixed(0);
      const dbUs = ((1000 * s.db) / s.ok).toFixed(0);
      const rps = Math.round(median(s.runs.map((r) => r.rps)));
      const problems = s.runs.map((r) => r.problems).filter(Boolean);
      console.log(
        `${workload} c=${connections} ${s.name.padEnd(10)}: ${cpuUs} µs CPU/request, Postgres ${dbUs} µs/request, ` +
          `median ${rps} req/s, peak RSS ${s.peakRssMb.toFixed(0)} MB ` +
          `(${s.flags.join(' ') || 'no flags'})${problems.length ? ` (${problems.join(' ')})` : ''}`,
      );
    }
    const [a, b] = sides;
    if (limits) {
      // At one connection the mean latency is 1 / throughput (autocannon's percentiles are whole milliseconds).
      const mean = (x: Side) => 1_000_000 / median(x.single.map((r) => r.rps));
      const p99 = (x: Side) => median(x.single.map((r) => r.p99Ms));
      const delta = mean(b) - mean(a);
      console.log(
        `c=1 mean latency: ${a.name} ${mean(a).toFixed(0)} µs, ${b.name} ${mean(b).toFixed(0)} µs: ` +
          `${delta >= 0 ? '+' : ''}${delta.toFixed(0)} µs (${(mean(b) / mean(a)).toFixed(2)}x); ` +
          `p99 ${p99(a)} / ${p99(b)} ms`,
      );
      const added = a.cellLatency.map((x, i) => b.cellLatency[i] - x);
      const us = (x: number) => `${x >= 0 ? '+' : ''}${x.toFixed(0)} µs`;
      console.log(`c=1 added latency by round, ${b.name} - ${a.name}: ${spread(added, us, ROUNDS)}`);
    }
    // Each round's two cells ran back to back: the median of their ratios is the figure least moved by the machine.
    const ratios = a.cellCpu.map((x, i) => b.cellCpu[i] / x);
    console.log(
      `CPU per request by round, ${b.name} / ${a.name}: ${ratios.map((x) => x.toFixed(2)).join(' ')}; ` +
        spread(ratios, (x) => x.toFixed(3), ROUNDS) +
        `; by process pair ${groupMedians(ratios, ROUNDS)
          .map((x) => x.toFixed(2))
          .join(' ')}`,
    );
    const throughput = median(b.runs.map((r) => r.rps)) / median(a.runs.map((r) => r.rps));
    const withDb = (b.cpu + b.db) / b.ok / ((a.cpu + a.db) / a.ok);
    console.log(
      `${b.name} / ${a.name}: throughput ${throughput.toFixed(2)}, ` +
        `CPU per request ${(b.cpu / b.ok / (a.cpu / a.ok)).toFixed(2)}, with Postgres ${withDb.toFixed(2)}`,
    );
    if (extra.sink)
      console.log(`OTLP exports received: ${extra.sink.requests} requests, ${(extra.sink.bytes / 1e6).toFixed(1)} MB`);
  } finally {
    extra.sink?.close();
    await Promise.all([stopAll(), emulator.stop()]);
    for (const s of sides) await s.bdb.drop().catch(() => undefined);
  }
}

/** BENCH_AB_ENV as variables, with `OTEL_EXPORTER_OTLP_ENDPOINT=sink` replaced by a draining receiver's URL. */
async function sideEnv(
  spec: string,
): Promise<{ env: Record<string, string>; sink: { requests: number; bytes: number; close(): void } | null }> {
  const vars = Object.fromEntries(
    spec
      .split(/\s+/)
      .filter(Boolean)
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  );
  if (vars.OTEL_EXPORTER_OTLP_ENDPOINT !== 'sink') return { env: vars, sink: null };
  const sink = { requests: 0, bytes: 0, close: () => server.close() };
  const server = http.createServer((req, res) => {
    sink.requests++;
    req.on('data', (c: Buffer) => {
      sink.bytes += c.length;
    });
    req.on('end', () =>
      res.writeHead(200, { 'content-type': String(req.headers['content-type'] ?? 'application/json') }).end(),
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  vars.OTEL_EXPORTER_OTLP_ENDPOINT = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { env: vars, sink };
}

/** RPM, TPM and a daily budget on the bench key, far above what a run uses: every check runs, none refuses. */
async function setBenchLimits(bdb: BenchDb): Promise<void> {
  const db = createPool(bdb.url, 1);
  try {
    const rate = { rpm: 1_000_000_000, tpm: 1_000_000_000_000 };
    const budget = { budgetDayVnd: 1_000_000_000_000 };
    const which = env.BENCH_LIMITS ?? 'all';
    await setKeyLimits(
      db,
      bdb.accountId,
      bdb.keyId,
      which === 'rate' ? rate : which === 'budget' ? budget : { ...rate, ...budget },
    );
  } finally {
    await db.end();
  }
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
