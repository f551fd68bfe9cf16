import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { Client } from 'undici';
import { projectRoot } from '../src/projectRoot';
import {
  apiNodeFlags,
  distDir,
  postgresCpuMs,
  forkTarget,
  freePort,
  machineCpuTicks,
  resetTreePeakRss,
  RssSampler,
  spawnTarget,
  treeCpuMs,
  treePeakRssMb,
  treeRssMb,
  type Target,
} from './lib/proc';
import { ensureLitellm, litellmCommand, LITELLM_MASTER_KEY, writeLitellmConfig } from './lib/litellm';
import { load, pairedSequential, sequential, type LoadResult, type RequestSpec } from './lib/load';
import { billingCheck, createBenchDb, adminUrl, waitForUsage, type BenchDb, type BillingCheck } from './lib/db';
import { renderTables, textTable, markdownTable, verdict as passText, type Cell, type Check } from './lib/report';
import { levelHolds, pacedStreamBody, streamLevel } from './lib/streams';
import {
  frontier,
  renderFrontier,
  renderProcesses,
  renderStreams,
  renderTail,
  renderTailCauses,
  type ProcCell,
  type StreamSummary,
  type StreamTarget,
} from './lib/frontier';
import { summariseProfiles } from './profile';
import type { BenchContext, BenchSection, SectionRunner } from './types';
import type { LoopDelay as LoopStats } from './targets/ipc';
import { attributeTail } from './lib/tailCauses';
import { sampleSched } from './lib/schedSpans';
import { runCacheBench } from './cache';

/**
 * `npm run bench`: the gateway beside the same emulated upstream called directly, a bare Koa + undici proxy
 * (the floor Node gives here) and two open-source peer gateways, Portkey (Node) and the LiteLLM proxy (Python, in
 * a virtualenv the bench installs once: bench/lib/litellm.ts), in one run on this machine, all on loopback.
 *
 * Every target and the upstream run in their own child processes, so CPU per request (utime+stime from
 * /proc/<pid>/stat) and peak RSS (VmHWM) are the target's own (its process tree's: a server's worker processes
 * count). The load generator (autocannon, and an undici loop for concurrency 1) runs here. The gateway runs with
 * auth, validation, routing, billing and request logs on, against a fresh Postgres database; after the run the
 * ledger must hold one charge per request served.
 *
 * Environment:
 * - BENCH_SECONDS: per measured cell, default 3.
 * - BENCH_ROUNDS: rounds through the targets, default 5; each figure is the median round, because single cells
 *   vary a lot on a shared machine.
 * - BENCH_WARMUP_SECONDS: default 2.
 * - BENCH_SEQ_N: sequential requests per target and workload at c=1, default 2000.
 * - BENCH_CONNECTIONS: default "10,50".
 * - BENCH_TARGETS: default "direct,bare-proxy,gateway,gateway-2p,portkey,litellm"; litellm is skipped with one line
 *   if it cannot be installed. gateway-2p is the gateway as `API_PROCESSES=2 npm run api` runs it (two API processes
 *   under node:cluster, REDIS_URL set), with a database of its own.
 * - BENCH_SWEEP: the concurrency sweep of the throughput frontier, default "1,2,4,8,16,32,64,128"; "0" skips it.
 * - BENCH_SWEEP_SECONDS: per sweep level and target, default 2.
 * - BENCH_STREAMS_MIN / BENCH_STREAMS_MAX: the streams-sustained levels, doubling from MIN (default 64) to MAX
 *   (default 2048); a target stops at its first level that does not hold. BENCH_STREAMS_MAX=0 skips the phase.
 *   BENCH_STREAMS_REQUIRE_CONCURRENT=0: a level holds on the gap rule alone (default: the streams must also have
 *   been delivering at one moment, bench/lib/streams.ts).
 * - BENCH_REDIS_URL: Redis for gateway-2p, default REDIS_URL or redis://127.0.0.1:6379.
 * - BENCH_WORKLOADS: default "chat,chat-stream,embeddings".
 * - BENCH_PROFILE: 1 or a list of targets such as "gateway,bare-proxy"; CPU-profiles those during the measured
 *   cells and prints their hot spots (profiles in bench/results/profiles/<target>/). This slows them down, so the
 *   figures of a profiled run are not the ones to publish.
 * - BENCH_DATABASE_ADMIN_URL: default TEST_DATABASE_ADMIN_URL or postgres://postgres@127.0.0.1:5432/postgres.
 * - BENCH_KEEP_DB=1: keeps the bench database.
 * - BENCH_GATEWAY_NODE_ARGS: Node flags for the gateway process instead of those of `npm run api`, e.g.
 *   "--max-semi-space-size=16", to try memory settings.
 * - BENCH_VIDEO=0: skips the video section, for quick runs of the synchronous ones.
 * - BENCH_CACHE=0: skips the response cache section (bench/cache.ts).
 * - BENCH_LITELLM_SPEC: the pip requirement to install, default litellm[proxy] pinned.
 * - BENCH_LITELLM_VENV: default ~/.cache/model-gateway-bench/litellm-venv.
 * - BENCH_PYTHON: default python3.
 */

const env = process.env;
const num = (name: string, def: number) => (env[name] ? Number(env[name]) : def);
const SECONDS = num('BENCH_SECONDS', 3);
const ROUNDS = num('BENCH_ROUNDS', 5);
const WARMUP = num('BENCH_WARMUP_SECONDS', 2);
const SEQ_N = num('BENCH_SEQ_N', 2000);
const CONNECTIONS = (env.BENCH_CONNECTIONS ?? '10,50').split(',').map(Number);
const TARGET_NAMES = (env.BENCH_TARGETS ?? 'direct,bare-proxy,gateway,gateway-2p,portkey,litellm').split(',');
const SWEEP = (env.BENCH_SWEEP ?? '1,2,4,8,16,32,64,128')
  .split(',')
  .map(Number)
  .filter((n) => n > 0);
const SWEEP_SECONDS = num('BENCH_SWEEP_SECONDS', 2);
const STREAMS_MIN = num('BENCH_STREAMS_MIN', 64);
const STREAMS_MAX = num('BENCH_STREAMS_MAX', 2048);
const REDIS_URL = env.BENCH_REDIS_URL ?? env.REDIS_URL ?? 'redis://127.0.0.1:6379';
/** The gateway targets: each runs against a bench database of its own, and its billing is checked. */
const GATEWAYS: Record<string, { processes: number }> = { gateway: { processes: 1 }, 'gateway-2p': { processes: 2 } };
const isGateway = (name: string) => name in GATEWAYS;
const WORKLOADS = (env.BENCH_WORKLOADS ?? 'chat,chat-stream,embeddings').split(',');
const PROFILED = env.BENCH_PROFILE === '1' ? ['gateway'] : (env.BENCH_PROFILE ?? '').split(',').filter(Boolean);
const PROFILE = PROFILED.length > 0;

const RESULTS = path.join(projectRoot(), 'bench', 'results');
const LOGS = path.join(RESULTS, 'logs');
const PROFILES = path.join(RESULTS, 'profiles');

const log = (line: string) => process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${line}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const gc = () => (globalThis as { gc?: () => void }).gc?.();

interface Workload {
  name: string;
  path: string;
  body: string;
  stream: boolean;
}
const WORKLOAD_DEFS: Record<string, Workload> = {
  chat: {
    name: 'chat',
    path: '/chat/completions',
    stream: false,
    body: JSON.stringify({
      model: 'gpt-4o-mini',
      max_tokens: 256,
      messages: [
        { role: 'system', content: 'You are a helpful assistant.' },
        { role: 'user', content: 'Write one short sentence about the sea.' },
      ],
    }),
  },
  'chat-stream': {
    name: 'chat-stream',
    path: '/chat/completions',
    stream: true,
    body: JSON.stringify({
      model: 'gpt-4o-mini',
      max_tokens: 256,
      stream: true,
      messages: [
        { role: 'system', content: 'You are a helpful assistant.' },
        { role: 'user', content: 'Write one short sentence about the sea.' },
      ],
    }),
  },
  embeddings: {
    name: 'embeddings',
    path: '/embeddings',
    stream: false,
    body: JSON.stringify({ model: 'text-embedding-3-small', input: 'The quick brown fox jumps over the lazy dog.' }),
  },
};

interface GatewayStats {
  served: Record<string, Record<string, number>>;
  maxBacklog: number;
  backlog: number;
  memoryAtPeak: NodeJS.MemoryUsage | null;
}
/** How far billing writes fell behind the responses. */
interface BillingLag {
  drainMs: number | null;
  countAtTimeout: number;
  stopMs: number;
  maxBacklog: number;
  backlogAtEnd: number;
}

/** A target under test: its process (for CPU and RSS), and how to address a request to it. */
interface BenchTarget {
  name: string;
  proc: Target;
  spec(w: Workload): RequestSpec;
}

const started: Target[] = [];
/**
 * Requests the load generator may have abandoned in flight against each gateway target (at most one per connection
 * at the end of each cell, and streams that did not hold): the gateway may still complete and bill those, though it
 * never counts them as served.
 */
const cutBound = new Map<string, number>();
const addCut = (target: string, n: number) => {
  if (isGateway(target)) cutBound.set(target, (cutBound.get(target) ?? 0) + n);
};
async function stopAll(): Promise<void> {
  await Promise.all(started.splice(0).map((t) => t.stop().catch(() => undefined)));
}
process.on('SIGINT', () => {
  void stopAll().finally(() => process.exit(130));
});

function sh(cmd: string, args: string[]): string {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8' }).trim();
  } catch {
    return '?';
  }
}

/**
 * The text a chat stream delivers (its deltas' content, concatenated), or why it is not a well-formed one: every
 * `data:` event JSON, [DONE] the last one. Peers re-encode the upstream's events (LiteLLM does), so the bench checks
 * what arrives, not just the status.
 */
function streamText(body: string): { text: string } | { error: string } {
  const events = body
    .split(/\r?\n/)
    .filter((l) => l.startsWith('data:'))
    .map((l) => l.slice(5).trim());
  if (events.at(-1) !== '[DONE]') return { error: `stream not ended by [DONE]: ${body.slice(-160)}` };
  let text = '';
  for (const e of events.slice(0, -1)) {
    try {
      const chunk = JSON.parse(e) as { choices?: { delta?: { content?: string | null } }[] };
      text += chunk.choices?.[0]?.delta?.content ?? '';
    } catch {
      return { error: `stream event is not JSON: ${e.slice(0, 160)}` };
    }
  }
  return text ? { text } : { error: 'stream delivered no content' };
}

/**
 * Sends one request; the workload is usable on this target only if it answers 200 (and a well-formed stream).
 * Returns the streamed text (to compare with the upstream's), or why the workload is unusable.
 */
async function probe(spec: RequestSpec, w: Workload): Promise<{ text: string } | { error: string }> {
  const u = new URL(spec.url);
  const c = new Client(u.origin);
  try {
    const r = await c.request({ method: 'POST', path: u.pathname, headers: spec.headers, body: spec.body });
    const text = await r.body.text();
    if (r.statusCode !== 200) return { error: `HTTP ${r.statusCode}: ${text.slice(0, 160).replace(/\s+/g, ' ')}` };
    return w.stream ? streamText(text) : { text: '' };
  } catch (e) {
    return { error: e instanceof Error ? e.message : String(e) };
  } finally {
    await c.close();
  }
}

/** Requests to `<base><workload path>` with a JSON body and these headers. */
const specAt =
  (base: string, headers: Record<string, string>) =>
  (w: Workload): RequestSpec => ({
    url: base + w.path,
    headers: { 'content-type': 'application/json', ...headers },
    body: w.body,
  });

/**
 * A peer gateway run as a command of its own (Portkey, LiteLLM) on a free loopback port, ready once `readyPath`
 * answers; requests go to its /v1 routes with `headers`.
 */
async function startPeer(
  name: string,
  logFile: string,
  command: (port: number) => { cmd: string; args: string[]; env?: NodeJS.ProcessEnv },
  opts: { readyPath: string; headers: Record<string, string>; readyTimeoutMs?: number },
): Promise<BenchTarget> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const { cmd, args, env: cmdEnv } = command(port);
  const t = await spawnTarget(name, cmd, args, {
    url,
    readyUrl: url + opts.readyPath,
    logFile,
    env: cmdEnv,
    readyTimeoutMs: opts.readyTimeoutMs,
  });
  started.push(t);
  return { name, proc: t, spec: specAt(`${url}/v1`, opts.headers) };
}

/** What the report says about the peers: their versions, or why one was skipped. */
const peerNotes: string[] = [];

async function startTargets(
  emulatorUrl: string,
  bdbs: Map<string, BenchDb>,
  workloads: Workload[],
): Promise<BenchTarget[]> {
  const upstream = `${emulatorUrl}/openai/v1`;
  const out: BenchTarget[] = [];
  for (const name of TARGET_NAMES) {
    const logFile = path.join(LOGS, `${name}.log`);
    fs.writeFileSync(logFile, '');
    if (name === 'direct') {
      // The target is the upstream itself.
      const emu = started.find((t) => t.name === 'emulator')!;
      out.push({ name, proc: emu, spec: specAt(upstream, { authorization: 'Bearer bench' }) });
    } else if (name === 'bare-proxy') {
      const t = await forkTarget(name, path.join(distDir(), 'targets', 'bareProxy.js'), {
        env: { UPSTREAM_URL: upstream },
        logFile,
      });
      started.push(t);
      out.push({ name, proc: t, spec: specAt(`${t.url}/v1`, { authorization: 'Bearer bench' }) });
    } else if (isGateway(name)) {
      const bdb = bdbs.get(name);
      if (!bdb) throw new Error(`${name} target needs its bench database`);
      const execArgv = gatewayFlags;
      const processes = GATEWAYS[name].processes;
      const t = await forkTarget(name, path.join(distDir(), 'targets', 'gateway.js'), {
        env: {
          DATABASE_URL: bdb.url,
          EMULATOR_URL: emulatorUrl,
          LOG_LEVEL: env.LOG_LEVEL ?? 'info',
          NODE_ENV: 'production',
          TEMPORAL_ADDRESS: 'off',
          API_PROCESSES: String(processes),
          // Two processes need Redis (rate limits shared), as `npm run api` requires; the bench key has no rate
          // limits, so no request calls it.
          ...(processes > 1 ? { REDIS_URL } : {}),
        },
        execArgv,
        logFile,
      });
      started.push(t);
      out.push({ name, proc: t, spec: specAt(`${t.url}/v1`, { authorization: `Bearer ${bdb.key}` }) });
    } else if (name === 'portkey') {
      const script = path.join(projectRoot(), 'node_modules', '@portkey-ai', 'gateway', 'build', 'start-server.js');
      out.push(
        await startPeer(
          name,
          logFile,
          (port) => ({
            cmd: process.execPath,
            args: [script, '--headless', `--port=${port}`],
            env: { NODE_ENV: 'production' },
          }),
          {
            readyPath: '/',
            headers: {
              authorization: 'Bearer bench',
              'x-portkey-provider': 'openai',
              'x-portkey-custom-host': upstream,
            },
          },
        ),
      );
    } else if (name === 'litellm') {
      // An optional peer: if it cannot be installed or started, one line says why and the rest of the bench runs.
      const install = await ensureLitellm(path.join(LOGS, 'litellm-install.log'), log);
      if ('skipped' in install) {
        log(`litellm skipped: ${install.skipped}`);
        peerNotes.push(`LiteLLM: skipped, ${install.skipped}.`);
        continue;
      }
      const config = path.join(RESULTS, 'litellm-config.yaml');
      writeLitellmConfig(config, upstream, [
        ...new Set(workloads.map((w) => (JSON.parse(w.body) as { model: string }).model)),
      ]);
      try {
        // Python start-up (imports, config) takes 10-30 s on this machine.
        out.push(
          await startPeer(name, logFile, (port) => litellmCommand(install, config, port), {
            readyPath: '/health/liveliness',
            headers: { authorization: `Bearer ${LITELLM_MASTER_KEY}` },
            readyTimeoutMs: 180_000,
          }),
        );
      } catch (e) {
        const why = e instanceof Error ? e.message : String(e);
        log(`litellm skipped: ${why}`);
        peerNotes.push(`LiteLLM: skipped, ${why}.`);
        continue;
      }
      const python = sh(path.join(path.dirname(install.bin), 'python'), [
        '-c',
        'import platform; print(platform.python_version())',
      ]);
      const installed =
        install.installedNowS !== null ? `; installed into its venv in this run, ${install.installedNowS} s` : '';
      peerNotes.push(
        `LiteLLM: litellm ${install.version} (Python ${python}; ` +
          `litellm --config <models as openai/<model> at the emulator, master key> --num_workers 1, no database, ` +
          `LITELLM_LOCAL_MODEL_COST_MAP=True${installed}).`,
      );
    } else {
      throw new Error(`unknown target ${name}`);
    }
    log(`${name} ready`);
  }
  return out;
}

/** CPU (target and upstream) and results gathered over the rounds of one target under one workload. */
interface Acc {
  runs: Map<number, LoadResult[]>;
  cpuMs: number;
  upstreamCpuMs: number;
  dbCpuMs: number;
  ok: number;
  /** Per connection level, summed over the rounds: where the machine's CPU went (for the 1-vs-2-process table). */
  where: Map<
    number,
    { cpuMs: number; upstreamMs: number; clientMs: number; wallMs: number; busy: number; total: number }
  >;
}

/** One measured cell: autocannon at `n` connections, with the target's (and upstream's) CPU time over it. */
async function measureCell(t: BenchTarget, emulatorPid: number, w: Workload, n: number, acc: Acc): Promise<void> {
  gc();
  await sleep(200);
  const c0 = treeCpuMs(t.proc.pid);
  const u0 = treeCpuMs(emulatorPid);
  const d0 = postgresCpuMs();
  const m0 = machineCpuTicks();
  const k0 = process.cpuUsage();
  const w0 = Date.now();
  const r = await load(t.spec(w), n, SECONDS);
  const wallMs = Date.now() - w0;
  const k = process.cpuUsage(k0);
  const m1 = machineCpuTicks();
  const cl = treeCpuMs(t.proc.pid) - c0;
  const ul = treeCpuMs(emulatorPid) - u0;
  // Let background work caused by these requests (billing batches, GC) land in this cell.
  await sleep(300);
  addCut(t.name, n);
  acc.cpuMs += treeCpuMs(t.proc.pid) - c0;
  acc.upstreamCpuMs += treeCpuMs(emulatorPid) - u0;
  acc.dbCpuMs += postgresCpuMs() - d0;
  const wh = acc.where.get(n) ?? { cpuMs: 0, upstreamMs: 0, clientMs: 0, wallMs: 0, busy: 0, total: 0 };
  wh.cpuMs += cl;
  wh.upstreamMs += ul;
  wh.clientMs += (k.user + k.system) / 1000;
  wh.wallMs += wallMs;
  wh.busy += m1.busy - m0.busy;
  wh.total += m1.total - m0.total;
  acc.where.set(n, wh);
  acc.ok += r.ok;
  const list = acc.runs.get(n) ?? [];
  list.push(r);
  acc.runs.set(n, list);
  const problems = r.problems ? `, ${r.problems}` : '';
  log(`${w.name} ${t.name} c=${n}: ${Math.round(r.rps)} req/s, p50 ${r.p50Ms} ms, p99 ${r.p99Ms} ms${problems}`);
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** The median round of each connection level (by throughput), with all rounds' problems summed up. */
function combine(runs: LoadResult[]): LoadResult {
  const m = median(runs.map((r) => r.rps));
  const best = runs.reduce((a, b) => (Math.abs(b.rps - m) < Math.abs(a.rps - m) ? b : a));
  return {
    ...best,
    rps: m,
    p50Ms: median(runs.map((r) => r.p50Ms)),
    p99Ms: median(runs.map((r) => r.p99Ms)),
    p50Us: median(runs.map((r) => r.p50Us)),
    p99Us: median(runs.map((r) => r.p99Us)),
    ok: runs.reduce((s, r) => s + r.ok, 0),
    failed: runs.reduce((s, r) => s + r.failed, 0),
    problems: runs
      .map((r) => r.problems)
      .filter(Boolean)
      .join(' '),
  };
}

const gatewayFlags =
  env.BENCH_GATEWAY_NODE_ARGS !== undefined
    ? env.BENCH_GATEWAY_NODE_ARGS.split(' ').filter(Boolean)
    : apiNodeFlags(projectRoot());

/** The Node flags `npm run api` starts the API with (package.json), so the bench measures the process as deployed. */

async function runSection(ctx: BenchContext): Promise<BenchSection | null> {
  const file = path.join(distDir(), 'video.js');
  if (env.BENCH_VIDEO === '0' || !fs.existsSync(file)) return null;
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const mod = require(file) as Record<string, unknown>;
  const fn = (mod.runVideoBench ?? mod.run ?? mod.default) as SectionRunner | undefined;
  if (typeof fn !== 'function') {
    log('bench/video.ts exists but exports no runner (runVideoBench, run or default): skipped');
    return null;
  }
  const r = await fn(ctx);
  return typeof r === 'string' ? { title: 'Video jobs', text: r, markdown: r } : r;
}

function billingReport(
  name: string,
  b: BillingCheck,
  served: Record<string, Record<string, number>>,
  lag: BillingLag | null,
  streams: { opened: number; held: number; served200: number } | null,
): { text: string; markdown: string; check: Check } {
  let ok200 = 0;
  let other = 0;
  for (const byStatus of Object.values(served)) {
    for (const [s, n] of Object.entries(byStatus)) {
      if (s === '200') ok200 += n;
      else other += n;
    }
  }
  // Every 200 is billed. A request the load generator abandoned at the end of a cell may still be completed (and
  // billed, or recorded as 499) by the gateway without counting as served: at most one per connection per cell.
  const slack = cutBound.get(name) ?? 0;
  const recordsOk = b.usageRecords >= ok200 && b.usageRecords <= ok200 + other + slack;
  // Charges are written per flush (one event per lease hold, itemised by the usage records naming it): every
  // usage record with a cost names an existing charge, the VND agree, and verifyProjections matches each charge
  // to the sum of its usage records.
  const chargesOk = b.usageRecordsUncharged === 0 && b.chargedVnd === b.usageCostVnd;
  const pass =
    ok200 === 0 ? null : recordsOk && chargesOk && b.projectionMismatches === 0 && b.usageRecordsCharged >= ok200;
  const rows = [
    ['responses served with 200 (counted in the gateway process)', ok200.toLocaleString('en-US')],
    ['other responses', other.toLocaleString('en-US')],
    ...(streams
      ? [
          [
            'of the 200s: paced streams of the streams-sustained phase (opened / held by the client)',
            `${streams.served200.toLocaleString('en-US')} (${streams.opened.toLocaleString('en-US')} / ` +
              `${streams.held.toLocaleString('en-US')})`,
          ],
        ]
      : []),
    [
      'usage_records',
      `${b.usageRecords.toLocaleString('en-US')} (may exceed the 200s by up to ` +
        `${slack.toLocaleString('en-US')} requests abandoned in flight at cell ends)`,
    ],
    ['usage_records with cost > 0', b.usageRecordsCharged.toLocaleString('en-US')],
    ['usage_records with cost > 0 naming no charged event', b.usageRecordsUncharged.toLocaleString('en-US')],
    ['charged ledger events (one per lease hold per flush)', b.chargedEvents.toLocaleString('en-US')],
    [
      'VND charged (ledger) / in usage_records',
      `${b.chargedVnd.toLocaleString('en-US')} / ${b.usageCostVnd.toLocaleString('en-US')}`,
    ],
    ['projection and charge/usage mismatches (verifyProjections)', String(b.projectionMismatches)],
    ...(lag
      ? [
          ['peak billing backlog under load (usage rows not yet written)', lag.maxBacklog.toLocaleString('en-US')],
          ['backlog when the load stopped', lag.backlogAtEnd.toLocaleString('en-US')],
          [
            'time after the load until every 200 had its usage record',
            lag.drainMs === null
              ? `not within 120 s (${lag.countAtTimeout.toLocaleString('en-US')} written)`
              : `${(lag.drainMs / 1000).toFixed(1)} s`,
          ],
          ['gateway shutdown (final flush) took', `${(lag.stopMs / 1000).toFixed(1)} s`],
        ]
      : []),
    ...b.byOperation.map((r) => [
      `usage ${r.operation} status ${r.status}`,
      `${r.n.toLocaleString('en-US')} requests, ${r.costVnd.toLocaleString('en-US')} VND`,
    ]),
    [
      'result',
      pass === null ? 'n/a: the gateway served nothing' : pass ? 'PASS: every request served was billed once' : 'FAIL',
    ],
  ];
  return {
    text: `\n== billing on during the bench, ${name} (ledger after flush) ==\n` + textTable(['item', 'value'], rows),
    markdown:
      `\n### Billing check, ${name} (ledger after the gateway flushed and stopped)\n\n` +
      markdownTable(['item', 'value'], rows),
    check: {
      name: `billing (${name}): every 200, streams included, has a usage record and is charged once`,
      value: `${b.usageRecordsCharged}/${ok200}`,
      target: 'all',
      pass,
    },
  };
}

async function main(): Promise<void> {
  fs.mkdirSync(LOGS, { recursive: true });
  if (PROFILE) {
    fs.rmSync(PROFILES, { recursive: true, force: true });
    fs.mkdirSync(PROFILES, { recursive: true });
  }
  const t0 = Date.now();
  const loadStart = os.loadavg()[0].toFixed(2);
  const memoryGb = Math.round(os.totalmem() / 2 ** 30);
  const cpus = `${os.cpus().length} x ${os.cpus()[0]?.model ?? '?'}`;
  const machine = `${cpus}, ${memoryGb} GB, Linux ${os.release()}, Node ${process.version}`;
  const portkeyVersion = sh(process.execPath, [
    '-p',
    `require(${JSON.stringify(path.join(projectRoot(), 'node_modules/@portkey-ai/gateway/package.json'))}).version`,
  ]);
  log(`machine: ${machine}; ${SECONDS} s per cell, ${WARMUP} s warm-up, ${SEQ_N} sequential requests at c=1`);

  const emulator = await forkTarget('emulator', path.join(distDir(), 'targets', 'emulator.js'), {
    logFile: path.join(LOGS, 'emulator.log'),
  });
  started.push(emulator);
  log(`emulator at ${emulator.url}`);
  const bdbs = new Map<string, BenchDb>();
  for (const name of TARGET_NAMES.filter(isGateway)) {
    const bdb = await createBenchDb(1_000_000_000_000);
    bdbs.set(name, bdb);
    log(`${name}: database ${bdb.name}, account ${bdb.accountId}`);
  }

  const cells: Cell[] = [];
  const peakRss: Record<string, number> = {};
  const idleRss: Record<string, number> = {};
  let gwMemory: NodeJS.MemoryUsage | null = null;
  const billings: {
    name: string;
    served: Record<string, Record<string, number>>;
    billing: BillingCheck;
    lag: BillingLag;
    streams: { opened: number; held: number; served200: number } | null;
  }[] = [];
  const sweeps = new Map<string, { target: string; sweep: LoadResult[] }[]>();
  const streamTargets: StreamTarget[] = [];
  let section: BenchSection | null = null;
  try {
    const workloads = WORKLOADS.map((w) => {
      const d = WORKLOAD_DEFS[w];
      if (!d) throw new Error(`unknown workload ${w}`);
      return d;
    });
    const targets = await startTargets(emulator.url, bdbs, workloads);
    const direct = targets.find((t) => t.name === 'direct');

    // Which workloads each target can serve (the gateway's routes may not all exist yet); a stream must deliver
    // the upstream's text (direct's, when direct is measured too).
    const unavailable = new Map<string, string>();
    for (const w of workloads) {
      let upstreamText: string | null = null;
      for (const t of [...targets].sort((a, b) => Number(b === direct) - Number(a === direct))) {
        const r = await probe(t.spec(w), w);
        let why: string | null = null;
        if ('error' in r) why = r.error;
        else if (w.stream && t === direct) upstreamText = r.text;
        else if (w.stream && upstreamText !== null && r.text !== upstreamText)
          why = `streamed text differs from the upstream's: ${JSON.stringify(r.text.slice(0, 80))}`;
        if (why) {
          unavailable.set(`${w.name}/${t.name}`, why);
          log(`${t.name} cannot serve ${w.name}: ${why}`);
        }
      }
    }
    // Peak RSS from here on is the peak under load.
    const samplers = new Map<string, RssSampler>();
    for (const t of targets) {
      idleRss[t.name] = treeRssMb(t.proc.pid);
      resetTreePeakRss(t.proc.pid);
      const s = new RssSampler(t.proc.pid, 100, true);
      s.start();
      samplers.set(t.name, s);
    }

    for (const w of workloads) {
      const live = targets.filter((t) => !unavailable.has(`${w.name}/${t.name}`));
      const accs = new Map<string, Acc>(
        live.map((t) => [t.name, { runs: new Map(), cpuMs: 0, upstreamCpuMs: 0, dbCpuMs: 0, ok: 0, where: new Map() }]),
      );
      for (const t of live) {
        await load(t.spec(w), CONNECTIONS[0], WARMUP);
        addCut(t.name, CONNECTIONS[0]);
      }
      const profiled = live.filter((t) => PROFILED.includes(t.name));
      for (const t of profiled) {
        fs.mkdirSync(path.join(PROFILES, t.name), { recursive: true });
        await t.proc.ask('profile-start');
      }
      // Rounds through the targets in rotating order, so load from anything else on the machine falls on all
      // of them alike; each figure is the median round.
      for (let round = 0; round < ROUNDS; round++) {
        for (const n of CONNECTIONS) {
          for (let i = 0; i < live.length; i++) {
            const t = live[(i + round) % live.length];
            await measureCell(t, emulator.pid, w, n, accs.get(t.name)!);
          }
        }
      }
      for (const t of profiled)
        await t.proc.ask('profile-stop', 60_000, { file: path.join(PROFILES, t.name, `${w.name}.cpuprofile`) });
      for (const t of targets) {
        const cell: Cell = { workload: w.name, target: t.name, load: [] };
        cells.push(cell);
        const why = unavailable.get(`${w.name}/${t.name}`);
        if (why) {
          cell.unavailable = why.length > 60 ? why.slice(0, 57) + '...' : why;
          continue;
        }
        const acc = accs.get(t.name)!;
        cell.load = CONNECTIONS.map((n) => combine(acc.runs.get(n)!));
        cell.cpuMsPerReq = acc.ok ? acc.cpuMs / acc.ok : NaN;
        cell.upstreamCpuMsPerReq = acc.ok ? acc.upstreamCpuMs / acc.ok : NaN;
        // Only the gateway uses the database; for the others this would be background noise.
        if (isGateway(t.name)) cell.dbCpuMsPerReq = acc.ok ? acc.dbCpuMs / acc.ok : NaN;
        cell.where = CONNECTIONS.map((n) => {
          const wh = acc.where.get(n)!;
          return {
            connections: n,
            cpuCores: wh.cpuMs / wh.wallMs,
            upstreamCores: wh.upstreamMs / wh.wallMs,
            clientCores: wh.clientMs / wh.wallMs,
            machineBusyPct: (100 * wh.busy) / wh.total,
          };
        });
      }
      // Concurrency 1: each proxy paired with direct calls, request by request.
      for (const t of targets) {
        const cell = cells.find((c) => c.workload === w.name && c.target === t.name)!;
        if (cell.unavailable) continue;
        gc();
        if (t.name === 'direct' || !direct || unavailable.has(`${w.name}/direct`)) {
          cell.seq = await sequential(t.spec(w), SEQ_N, w.stream);
        } else {
          // The target's event-loop delay and garbage collections over its c=1 requests: where its tail comes from.
          await t.proc.ask('loop', 10_000, { cmd: 'start' }).catch(() => null);
          // The upstream's own collections too: a pause there delays the target's request, not the target.
          await direct.proc.ask('loop', 10_000, { cmd: 'start' }).catch(() => null);
          const sched = sampleSched(t.proc.pid, emulator.pid);
          const p = await pairedSequential(direct.spec(w), t.spec(w), SEQ_N, w.stream);
          const schedSpans = await sched.stop();
          const loopStats =
            (await t.proc
              .ask<{ result: LoopStats | null }>('loop', 10_000, { cmd: 'stop' })
              .then((x) => x.result)
              .catch(() => null)) ?? undefined;
          const upstreamGcs = (
            (
              await direct.proc
                .ask<{ result: LoopStats | null }>('loop', 10_000, { cmd: 'stop' })
                .then((x) => x.result)
                .catch(() => null)
            )?.spans ?? []
          ).map((g) => ({ ...g, name: `${g.name} in the upstream` }));
          if (loopStats) {
            const { spans, ...stats } = loopStats;
            cell.seqLoop = stats;
            cell.tailCauses =
              attributeTail(p.pairs, spans ?? [], [...p.clientGcs, ...upstreamGcs, ...schedSpans]) ?? undefined;
          }
          cell.seq = p.target;
          cell.addedP50Us = p.addedP50Us;
          cell.addedP99Us = p.addedP99Us;
        }
        const added =
          cell.addedP50Us !== undefined
            ? `, added p50 ${Math.round(cell.addedP50Us)} µs, p99 ${Math.round(cell.addedP99Us!)} µs`
            : '';
        log(
          `${w.name} ${t.name} c=1: p50 ${Math.round(cell.seq.p50Us)} µs, p99 ${Math.round(cell.seq.p99Us)} µs${added}`,
        );
      }
    }

    for (const t of targets) {
      const sampled = samplers.get(t.name)!.stop();
      let hwm = 0;
      try {
        hwm = treePeakRssMb(t.proc.pid);
      } catch {}
      peakRss[t.name] = Math.max(hwm, sampled);
    }

    // The throughput frontier: one sweep of concurrency levels per workload, the targets in rotating order at
    // each level (after the peak RSS above was read, so the sweep's higher levels do not move that figure).
    if (SWEEP.length) {
      for (const w of workloads) {
        const live = targets.filter((t) => !unavailable.has(`${w.name}/${t.name}`));
        const per = live.map((t) => ({ target: t.name, sweep: [] as LoadResult[] }));
        sweeps.set(w.name, per);
        for (const [li, c] of SWEEP.entries()) {
          for (let i = 0; i < live.length; i++) {
            const k = (i + li) % live.length;
            const t = live[k];
            gc();
            await sleep(100);
            const r = await load(t.spec(w), c, SWEEP_SECONDS);
            addCut(t.name, c);
            per[k].sweep.push(r);
            log(
              `sweep ${w.name} ${t.name} c=${c}: ${Math.round(r.rps)} req/s, p99 ${Math.round(r.p99Us)} µs` +
                (r.problems ? `, ${r.problems}` : ''),
            );
          }
        }
        for (const p of per) {
          const cell = cells.find((x) => x.workload === w.name && x.target === p.target);
          if (cell) cell.frontier = frontier(p.sweep);
        }
      }
    }

    // Streams sustained: the emulator paces its events 20 ms apart; levels double until a target no longer holds.
    const streamServed = new Map<string, number>();
    const gatewayServed200 = async (t: BenchTarget) =>
      Object.values((await t.proc.ask<{ stats: GatewayStats }>('stats')).stats.served).reduce(
        (s, byStatus) => s + (byStatus['200'] ?? 0),
        0,
      );
    if (STREAMS_MAX >= STREAMS_MIN && STREAMS_MIN > 0) {
      const setEmulator = async (settings: object) => {
        const r = await fetch(`${emulator.url}/_emulator/config`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(settings),
        });
        await r.arrayBuffer();
      };
      const paced: Workload = {
        name: 'paced-stream',
        path: '/chat/completions',
        stream: true,
        body: pacedStreamBody(),
      };
      for (const t of targets) {
        streamTargets.push({ target: t.name, levels: [], idleRssMb: idleRss[t.name], recoveredRssMb: null });
        if (isGateway(t.name)) streamServed.set(t.name, await gatewayServed200(t));
      }
      // Every stream holds a socket in the client, and two in a proxy (client side, upstream side).
      const fdLimit = Number(/^Max open files\s+(\d+)/m.exec(fs.readFileSync('/proc/self/limits', 'utf8'))?.[1]);
      if (fdLimit && fdLimit < STREAMS_MAX * 2 + 256)
        log(`streams: open files limit ${fdLimit} is below ${STREAMS_MAX * 2 + 256}; high levels may fail on EMFILE`);
      await setEmulator({ chunkDelayMs: 20 });
      try {
        let alive = targets.slice();
        for (let n = STREAMS_MIN, li = 0; n <= STREAMS_MAX && alive.length; n *= 2, li++) {
          const failed = new Set<string>();
          for (let i = 0; i < alive.length; i++) {
            const t = alive[(i + li) % alive.length];
            gc();
            await sleep(500);
            const rssBeforeMb = treeRssMb(t.proc.pid);
            const sampler = new RssSampler(t.proc.pid, 100, true);
            sampler.start();
            const c0 = treeCpuMs(t.proc.pid);
            const u0 = treeCpuMs(emulator.pid);
            const loop = (cmd: 'start' | 'stop') =>
              t.proc
                .ask<{ result: { p99Ms: number; maxMs: number } | null }>('loop', 10_000, { cmd })
                .then((x) => x.result)
                .catch(() => null);
            await loop('start');
            // BENCH_PROFILE: each level of a profiled target is profiled too (per stream, in the report).
            const profiling = PROFILED.includes(t.name);
            if (profiling) {
              fs.mkdirSync(path.join(PROFILES, t.name), { recursive: true });
              await t.proc.ask('profile-start');
            }
            const m0 = machineCpuTicks();
            const r = await streamLevel(t.spec(paced), n);
            const m1 = machineCpuTicks();
            if (profiling)
              await t.proc.ask('profile-stop', 60_000, {
                file: path.join(PROFILES, t.name, `streams-${n}.cpuprofile`),
              });
            const loopDelay = await loop('stop');
            const machineBusyPct = (100 * (m1.busy - m0.busy)) / Math.max(1, m1.total - m0.total);
            const cpuMs = treeCpuMs(t.proc.pid) - c0;
            const upstreamCpuMs = t.name === 'direct' ? 0 : treeCpuMs(emulator.pid) - u0;
            const rssPeakMb = sampler.stop();
            addCut(t.name, n - r.held);
            streamTargets
              .find((s) => s.target === t.name)!
              .levels.push({ ...r, cpuMs, upstreamCpuMs, rssBeforeMb, rssPeakMb, machineBusyPct, loopDelay });
            if (!levelHolds(r)) failed.add(t.name);
            const why = Object.entries(r.failures)
              .map(([k, v]) => `${v}x ${k}`)
              .join(', ');
            log(
              `streams ${t.name} ${n}: ${r.held} held${why ? ` (${why})` : ''}; ` +
                `TTFD p99 ${r.ttfdP99Ms.toFixed(1)} ms, ` +
                `inter-delta p99 ${r.gapP99Ms.toFixed(1)} ms, max ${r.maxGapMs.toFixed(1)} ms; ` +
                `load generator ${(r.clientCpuMs / r.wallMs).toFixed(2)} cores`,
            );
          }
          alive = alive.filter((t) => !failed.has(t.name));
        }
      } finally {
        await setEmulator({ chunkDelayMs: 0 });
      }
      // Recovered: after the load, after a full GC where the target answers the bench's IPC (the Node ones).
      await sleep(2000);
      for (const t of targets) {
        await t.proc.ask('gc', 30_000).catch(() => undefined);
      }
      await sleep(1000);
      for (const s of streamTargets) s.recoveredRssMb = treeRssMb(targets.find((t) => t.name === s.target)!.proc.pid);
      for (const t of targets.filter((x) => isGateway(x.name))) {
        const st = streamTargets.find((s) => s.target === t.name)!;
        st.served200 = (await gatewayServed200(t)) - (streamServed.get(t.name) ?? 0);
      }
    }

    for (const gw of targets.filter((t) => isGateway(t.name))) {
      const bdb = bdbs.get(gw.name)!;
      const st = (await gw.proc.ask<{ stats: GatewayStats }>('stats')).stats;
      const served = st.served;
      if (gw.name === 'gateway') gwMemory = st.memoryAtPeak;
      const ok200 = Object.values(served).reduce((s, byStatus) => s + (byStatus['200'] ?? 0), 0);
      log(
        `${gw.name} served ${ok200} x 200; billing backlog now ${st.backlog}, ` +
          `peak ${st.maxBacklog} usage rows in memory; waiting for the ledger`,
      );
      const drain = await waitForUsage(bdb, ok200, 120_000);
      // Stopping the gateway flushes whatever is left of its pending charges and usage records.
      const s0 = Date.now();
      await gw.proc.stop(180_000).catch((e) => log(`${gw.name}: ${e instanceof Error ? e.message : String(e)}`));
      const lag = {
        drainMs: drain.ms,
        countAtTimeout: drain.count,
        stopMs: Date.now() - s0,
        maxBacklog: st.maxBacklog,
        backlogAtEnd: st.backlog,
      };
      const sx = streamTargets.find((s) => s.target === gw.name);
      const streams = sx
        ? {
            opened: sx.levels.reduce((a, l) => a + l.streams, 0),
            held: sx.levels.reduce((a, l) => a + l.held, 0),
            served200: sx.served200 ?? 0,
          }
        : null;
      billings.push({ name: gw.name, served, billing: await billingCheck(bdb), lag, streams });
    }
  } finally {
    await stopAll();
  }

  const tables = renderTables(cells, CONNECTIONS, peakRss);
  const checksAll: Check[] = [...tables.checks];
  const out: string[] = [];
  const md: string[] = [];
  const flagsFrom = env.BENCH_GATEWAY_NODE_ARGS !== undefined ? ' (BENCH_GATEWAY_NODE_ARGS)' : ' (as npm run api)';
  const header = [
    `Machine: ${machine}. Everything on loopback; ` +
      `the emulated upstream, each target and the load generator in separate processes.`,
    `Load: autocannon (keep-alive, pipelining 1), ${ROUNDS} rounds of ${SECONDS} s cells through the targets ` +
      `in rotating order after a ${WARMUP} s warm-up; each figure is the median round. ` +
      `c=1: ${SEQ_N} sequential requests per target, each paired with a direct one (undici, hrtime).`,
    `CPU ms/req: the target process's (and its children's) utime+stime over the c=${CONNECTIONS.join(' and c=')} ` +
      `cells / requests served (for direct: the upstream's own); Postgres CPU ms/req: every local postgres process ` +
      `over the gateway's cells (its billing writes share these cores). Peak RSS: VmHWM of the target process, ` +
      `reset after start-up. For a target with worker processes, CPU and RSS are its process tree's ` +
      `(RSS summed over its processes).`,
    `Load average (1 min) at start / end: ${loadStart} / ${os.loadavg()[0].toFixed(2)} ` +
      `(other work shares this machine).`,
    `Gateway: auth, validation, routing, billing (Postgres) and request logging on, TEMPORAL_ADDRESS=off ` +
      `(synchronous operations only); Node flags ${gatewayFlags.join(' ') || '(none)'}${flagsFrom}. ` +
      `Portkey: @portkey-ai/gateway ${portkeyVersion} ` +
      `(node build/start-server.js --headless, @hono/node-server 1.13.8).`,
    ...(TARGET_NAMES.includes('gateway-2p')
      ? [
          `gateway-2p: the same gateway with API_PROCESSES=2 (a node:cluster primary and two API processes sharing ` +
            `its port, REDIS_URL set), against a database of its own; its CPU and RSS are its process tree's.`,
        ]
      : []),
    ...(SWEEP.length
      ? [
          `Throughput frontier: one sweep at c=${SWEEP.join(',')}, ${SWEEP_SECONDS} s per level and target ` +
            `(rotating order), p99 from each response's own time (µs); the frontier is the most req/s of a level ` +
            `with p99 under the bound and no failed request.`,
        ]
      : []),
    ...(STREAMS_MAX >= STREAMS_MIN && STREAMS_MIN > 0
      ? [
          `Streams sustained: the emulator paces 64 content deltas 20 ms apart (chunkDelayMs=20); ` +
            `${STREAMS_MIN}..${STREAMS_MAX} streams opened at once per level, doubling, one raw TCP connection ` +
            `each (bench/lib/streams.ts); a target stops at its first level that does not hold.`,
        ]
      : []),
    ...peerNotes,
  ];
  out.push(header.join('\n'), tables.text);
  md.push(
    `## Benchmark (${new Date().toISOString().slice(0, 10)})\n`,
    header.map((h) => `- ${h}`).join('\n'),
    tables.markdown,
  );
  const mb = (n: number) => `${Math.round(n / 2 ** 20)} MB`;
  const memLine =
    `RSS before the load (after start-up): ${Object.entries(idleRss)
      .map(([k, v]) => `${k} ${Math.round(v)} MB`)
      .join(', ')}.` +
    (gwMemory
      ? ` Gateway at its RSS peak: rss ${mb(gwMemory.rss)}, ` +
        `V8 heap ${mb(gwMemory.heapUsed)} used of ${mb(gwMemory.heapTotal)}, ` +
        `external ${mb(gwMemory.external)} (array buffers ${mb(gwMemory.arrayBuffers)}).`
      : '');
  out.push('\n' + memLine);
  md.push('\n' + memLine + '\n');
  const add = (r: { text: string; markdown: string }) => {
    out.push(r.text);
    md.push(r.markdown);
  };
  const tail = renderTail(cells);
  if (tail) add(tail);
  const causes = renderTailCauses(cells);
  if (causes) add(causes);
  for (const [w, per] of sweeps) add(renderFrontier(w, per));
  let streamSummary: StreamSummary[] = [];
  if (streamTargets.length) {
    const r = renderStreams(streamTargets, STREAMS_MAX);
    streamSummary = r.summary;
    add(r.rendered);
    const g = streamSummary.find((x) => x.target === 'gateway');
    const b = streamSummary.find((x) => x.target === 'bare-proxy');
    checksAll.push({
      name: 'streams sustained: gateway / bare proxy (same run)',
      value: g && b ? `${g.sustained} / ${b.sustained}` : '-',
      target: '>= 1',
      pass: g && b ? g.sustained >= b.sustained : null,
    });
  }
  // Issue 40 points 3 and 4: the tail at c=1 against the bare Koa proxy's, as ratios.
  for (const w of WORKLOADS) {
    const g = cells.find((c) => c.workload === w && c.target === 'gateway' && !c.unavailable);
    const b = cells.find((c) => c.workload === w && c.target === 'bare-proxy' && !c.unavailable);
    if (!g || !b || g.addedP99Us === undefined || b.addedP99Us === undefined) continue;
    const ratio = g.addedP99Us / Math.max(1, b.addedP99Us);
    checksAll.push({
      name: `${w}: gateway's added c=1 p99 / bare proxy's`,
      value: ratio.toFixed(2),
      target: '<= 1.2',
      pass: ratio <= 1.2,
    });
    const over = g.addedP50Us! - b.addedP50Us!;
    checksAll.push({
      name: `${w}: gateway's added c=1 p50 - bare proxy's (µs)`,
      value: (over >= 0 ? '+' : '') + Math.round(over),
      target: '<= +100',
      pass: over <= 100,
    });
  }
  if (TARGET_NAMES.includes('gateway') && TARGET_NAMES.includes('gateway-2p')) {
    const rows: { label: string; one: ProcCell | undefined; two: ProcCell | undefined }[] = [];
    for (const w of WORKLOADS)
      for (const n of CONNECTIONS) {
        const of = (name: string): ProcCell | undefined => {
          const c = cells.find((x) => x.workload === w && x.target === name && !x.unavailable);
          const l = c?.load.find((x) => x.connections === n);
          const wh = c?.where?.find((x) => x.connections === n);
          return l && wh ? { rps: l.rps, ...wh } : undefined;
        };
        rows.push({ label: `${w} c=${n}`, one: of('gateway'), two: of('gateway-2p') });
      }
    add(
      renderProcesses(
        rows,
        {
          one: streamSummary.find((x) => x.target === 'gateway'),
          two: streamSummary.find((x) => x.target === 'gateway-2p'),
        },
        os.cpus().length,
      ),
    );
  }
  const issue40 = checksAll.slice(tables.checks.length);
  if (issue40.length) {
    const ch = ['check', 'value', 'target', 'result'];
    const rows = issue40.map((c) => [c.name, c.value, c.target, passText(c.pass)]);
    add({
      text: '\n== issue 40 targets (ratios to the bare proxy, same run) ==\n' + textTable(ch, rows),
      markdown: '\n### Issue 40 targets (ratios to the bare proxy, same run)\n\n' + markdownTable(ch, rows),
    });
  }
  for (const b of billings) {
    const r = billingReport(b.name, b.billing, b.served, b.lag, b.streams);
    add(r);
    checksAll.push(r.check);
  }
  for (const name of PROFILED) {
    for (const w of WORKLOADS) {
      const file = path.join(PROFILES, name, `${w}.cpuprofile`);
      const served = cells.find((c) => c.workload === w && c.target === name)?.load.reduce((s, l) => s + l.ok, 0) ?? 0;
      if (fs.existsSync(file))
        out.push(`\n== ${name} CPU profile, ${w}, measured cells only ==\n` + summariseProfiles(file, 40, served));
    }
    for (let n = STREAMS_MIN; STREAMS_MAX > 0 && n <= STREAMS_MAX; n *= 2) {
      const file = path.join(PROFILES, name, `streams-${n}.cpuprofile`);
      if (fs.existsSync(file))
        out.push(`\n== ${name} CPU profile, ${n} paced streams (per stream) ==\n` + summariseProfiles(file, 40, n));
    }
  }

  try {
    const ctx: BenchContext = { adminDatabaseUrl: adminUrl(), resultsDir: RESULTS, seconds: SECONDS, log };
    section = await runSection(ctx);
  } catch (e) {
    const msg = e instanceof Error ? (e.stack ?? e.message) : String(e);
    section = {
      title: 'Video jobs',
      text: `video section failed: ${msg}`,
      markdown: `Video section failed: ${msg.split('\n')[0]}`,
      pass: false,
    };
  }
  // Top-ups: a burst of bank-feed webhooks (bench/topups.ts; BENCH_TOPUPS=0: skipped).
  if (env.BENCH_TOPUPS !== '0') {
    const { runTopupBench } = await import('./topups');
    const t = await runTopupBench({ log }).catch((e): BenchSection => ({
      title: 'Top-ups',
      text: `failed: ${(e as Error).message}`,
      markdown: 'failed',
      pass: false,
    }));
    out.push(`\n== ${t.title} ==\n${t.text}`);
    md.push(`\n### ${t.title}\n\n${t.markdown}`);
    checksAll.push({ name: `${t.title}: credited once`, value: '', target: '', pass: t.pass ?? null });
  }
  if (section) {
    out.push(`\n== ${section.title} ==\n${section.text}`);
    md.push(`\n### ${section.title}\n\n${section.markdown}`);
    if (section.pass !== undefined)
      checksAll.push({ name: `${section.title}: section targets`, value: '', target: '', pass: section.pass });
  }
  // The response cache and prompt-cache routing (bench/cache.ts, issue 49); BENCH_CACHE=0 skips it.
  if (env.BENCH_CACHE !== '0') {
    const ctx: BenchContext = { adminDatabaseUrl: adminUrl(), resultsDir: RESULTS, seconds: SECONDS, log };
    const cache = await runCacheBench(ctx).catch((e: Error) => ({
      title: 'Response cache and prompt-cache routing',
      text: `cache section failed: ${e.stack ?? e.message}`,
      markdown: `Cache section failed: ${e.message}`,
      pass: false,
    }));
    out.push(`\n== ${cache.title} ==\n${cache.text}`);
    md.push(`\n### ${cache.title}\n\n${cache.markdown}`);
    checksAll.push({ name: `${cache.title}: section targets`, value: '', target: '', pass: cache.pass ?? null });
  }

  const failed = checksAll.filter((c) => c.pass === false);
  const missing = checksAll.filter((c) => c.pass === null);
  const verdict = failed.length
    ? `FAIL (${failed.length} of ${checksAll.length} checks failed: ${failed.map((c) => c.name).join('; ')})`
    : 'PASS';
  const unmeasured = missing.length ? `; ${missing.length} checks could not be measured` : '';
  const summary = `\nOverall: ${verdict}${unmeasured}. Took ${Math.round((Date.now() - t0) / 1000)} s.`;
  out.push(summary);
  md.push('\n' + summary.trim());
  const text = out.join('\n');
  process.stdout.write(text + '\n');
  const mdText = md.join('\n') + '\n';
  fs.writeFileSync(path.join(RESULTS, 'latest.md'), mdText);
  fs.writeFileSync(
    path.join(RESULTS, 'latest.json'),
    JSON.stringify(
      {
        date: new Date().toISOString(),
        machine,
        seconds: SECONDS,
        connections: CONNECTIONS,
        cells,
        peakRss,
        billing: billings,
        sweeps: Object.fromEntries(sweeps),
        streams: streamTargets,
        streamSummary,
        checks: checksAll,
        section: section ? { title: section.title, pass: section.pass } : null,
      },
      null,
      2,
    ),
  );
  log(`markdown written to ${path.relative(projectRoot(), path.join(RESULTS, 'latest.md'))}`);
  if (env.BENCH_KEEP_DB !== '1')
    for (const bdb of bdbs.values()) await bdb.drop().catch((e) => log(`could not drop ${bdb.name}: ${e}`));
}

main().then(
  () => process.exit(0),
  async (e) => {
    console.error(e instanceof Error ? (e.stack ?? e.message) : String(e));
    await stopAll();
    process.exit(1);
  },
);
