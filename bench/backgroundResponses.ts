import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { request } from 'undici';
import { projectRoot } from '../src/projectRoot';
import { createPool } from '../src/db/pool';
import { startEmulator } from '../emulator/server';
import { findTemporalCli, startTemporalDevServer } from '../src/runtime/temporalDevServer';
import { createBenchDb } from './lib/db';
import { freePort, rssMb, RssSampler, stopChild } from './lib/proc';

/**
 * Background responses in flight (issue 38 point 8), run alone: `node dist/bench/backgroundResponses.js` (after
 * `npm run build`); not part of `npm run bench` (a minute or more of wall time).
 *
 * The API and the worker run as separate processes, as deployed, against a fresh Postgres database, a Temporal dev
 * server (TEMPORAL_ADDRESS, or one started here) and the emulator with paced streams, reached through a recording
 * pass-through in this process (it notes when each upstream stream ended and how many were open at once).
 * BENCH_BG_N (default 1000) background responses are POSTed at concurrency 50 and all are held in flight
 * (BACKGROUND_MAX_IN_FLIGHT_PER_KEY raised above N). Reported: the worker's RSS (idle, peak), responses in flight
 * and upstream calls open at once (peaks), events stored per second, and per response the time from the end of
 * the upstream's stream (its last event) to `completed` in the database (p50 / p99 / max).
 * BENCH_BG_CHUNK_MS (default 25000): the emulator's delay between events, so each answer lasts about 6 minutes
 * (14 events), longer than submitting and starting all of them takes on a loaded machine: the long calls background
 * mode is for, and what lets all N stream at once.
 */

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pct = (s: number[], p: number) =>
  s.length ? s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] : NaN;
const round = (n: number, d = 1) => Math.round(n * 10 ** d) / 10 ** d;

function startProc(script: string, env: NodeJS.ProcessEnv, logFile: string): ChildProcess {
  const fd = fs.openSync(logFile, 'a');
  const child = spawn(process.execPath, ['--enable-source-maps', script], {
    env: { ...process.env, ...env },
    stdio: ['ignore', fd, fd],
  });
  fs.closeSync(fd);
  return child;
}

/** A pass-through to the emulator recording when each streamed answer ended, by the bench marker in its body. */
async function recordingProxy(target: string) {
  const ended = new Map<string, number>();
  let open = 0;
  let peakOpen = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const marker = /bgbench-(\d+)/.exec(body.toString())?.[0];
      open++;
      peakOpen = Math.max(peakOpen, open);
      const up = http.request(
        new URL(req.url!, target),
        { method: req.method, headers: { ...req.headers, host: new URL(target).host } },
        (ur) => {
          res.writeHead(ur.statusCode!, ur.headers);
          ur.pipe(res);
          ur.on('end', () => {
            open--;
            if (marker) ended.set(marker, Date.now());
          });
        },
      );
      up.on('error', () => {
        open--;
        res.destroy();
      });
      up.end(body);
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    ended,
    peakOpen: () => peakOpen,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

async function main(): Promise<string> {
  const n = Number(process.env.BENCH_BG_N ?? 1000);
  const chunkMs = Number(process.env.BENCH_BG_CHUNK_MS ?? 25_000);
  const dist = path.resolve(__dirname, '..');
  const logs = path.join(projectRoot(), 'bench', 'results', 'logs');
  fs.mkdirSync(logs, { recursive: true });
  const log = (l: string) => process.stderr.write(`[bench bg ${new Date().toISOString().slice(11, 19)}] ${l}\n`);
  const cleanup: (() => Promise<unknown>)[] = [];
  try {
    let temporalAddress = process.env.TEMPORAL_ADDRESS;
    if (!temporalAddress) {
      const cli = findTemporalCli();
      if (!cli) throw new Error('no temporal CLI and no TEMPORAL_ADDRESS');
      const dev = await startTemporalDevServer({ cli, headless: true });
      cleanup.push(() => dev.stop());
      temporalAddress = dev.address;
    }
    const bench = await createBenchDb(1_000_000_000_000);
    cleanup.push(() => bench.drop());
    const db = createPool(bench.url, 4);
    cleanup.unshift(() => db.end());
    const emulator = await startEmulator();
    cleanup.push(() => emulator.close());
    const proxy = await recordingProxy(emulator.url);
    cleanup.unshift(() => proxy.close());
    const port = await freePort();
    const env: NodeJS.ProcessEnv = {
      DATABASE_URL: bench.url,
      TEMPORAL_ADDRESS: temporalAddress,
      TEMPORAL_TASK_QUEUE: `bg-bench-${randomUUID()}`,
      EMULATOR_URL: proxy.url,
      STORAGE_DRIVER: 'fs',
      STORAGE_DIR: fs.mkdtempSync(path.join(os.tmpdir(), 'gw-bench-bg-')),
      HOST: '127.0.0.1',
      PORT: String(port),
      LOG_LEVEL: 'warn',
      BACKGROUND_MAX_IN_FLIGHT_PER_KEY: String(n + 10),
      CATALOG_PATH: path.join(projectRoot(), 'config', 'catalog.json'),
    };
    const api = startProc(path.join(dist, 'src', 'server.js'), env, path.join(logs, 'bg-api.log'));
    cleanup.unshift(() => stopChild(api, () => api.kill('SIGTERM')).catch(() => undefined));
    const worker = startProc(path.join(dist, 'src', 'worker.js'), env, path.join(logs, 'bg-worker.log'));
    cleanup.unshift(() => stopChild(worker, () => worker.kill('SIGTERM')).catch(() => undefined));
    const url = `http://127.0.0.1:${port}`;
    for (let t = Date.now(); ; await sleep(200)) {
      if (Date.now() - t > 60_000) throw new Error('API did not start');
      if (
        await request(`${url}/healthz`).then(
          (r) => r.statusCode === 200,
          () => false,
        )
      )
        break;
    }
    const headers = { authorization: `Bearer ${bench.key}`, 'content-type': 'application/json' };
    const post = async (i: number): Promise<string> => {
      const body = JSON.stringify({ model: 'gpt-4o-mini', input: `bgbench-${i} tell a story`, background: true });
      const r = await request(`${url}/v1/responses`, { method: 'POST', headers, body });
      const j = (await r.body.json()) as { id?: string; status?: string };
      if (r.statusCode !== 200 || j.status !== 'queued') throw new Error(`POST answered ${r.statusCode}`);
      return j.id!;
    };
    const counts = async () =>
      (
        await db.query(
          `SELECT count(*) FILTER (WHERE status IN ('queued', 'in_progress'))::int AS open,
                  count(*) FILTER (WHERE status NOT IN ('queued', 'in_progress'))::int AS done,
                  (SELECT count(*)::int FROM background_response_events) AS events
             FROM background_responses`,
        )
      ).rows[0] as { open: number; done: number; events: number };

    // Warm-up: the worker bundles its workflows; a few responses end to end.
    log('warm-up');
    const warm = await Promise.all([1, 2, 3].map((i) => post(-i)));
    while ((await counts()).done < warm.length) await sleep(200);
    const base = await counts();
    const idle = rssMb(worker.pid!);
    const sampler = new RssSampler(worker.pid!, 100);
    sampler.start();

    // Paced from here on (the warm-up's answers are not).
    emulator.control.settings.chunkDelayMs = chunkMs;
    log(`${n} background responses, events every ${chunkMs} ms`);
    const ids = new Map<string, string>();
    const t0 = Date.now();
    let next = 0;
    let peakOpen = 0;
    let sampling = true;
    const watch = (async () => {
      while (sampling) {
        peakOpen = Math.max(peakOpen, (await counts()).open);
        await sleep(500);
      }
    })();
    await Promise.all(
      Array.from({ length: 50 }, async () => {
        while (next < n) {
          const i = next++;
          ids.set(`bgbench-${i}`, await post(i));
        }
      }),
    );
    const postedMs = Date.now() - t0;
    for (;;) {
      const c = await counts();
      if (c.done - base.done >= n) break;
      if (Date.now() - t0 > 30 * 60_000) throw new Error(`timed out with ${c.open} open`);
      await sleep(500);
    }
    sampling = false;
    await watch;
    const peak = sampler.stop();
    const rows = await db.query(
      `SELECT id, status, extract(epoch FROM ended_at) * 1000 AS ended FROM background_responses
        WHERE id = ANY($1)`,
      [[...ids.values()]],
    );
    const endedAt = new Map(rows.rows.map((r) => [r.id as string, Number(r.ended)]));
    const completed = rows.rows.filter((r) => r.status === 'completed').length;
    const attempts = (
      await db.query(
        `SELECT count(*)::int AS n, count(*) FILTER (WHERE outcome = 'lost')::int AS lost
           FROM background_response_attempts WHERE response_id = ANY($1)`,
        [[...ids.values()]],
      )
    ).rows[0] as { n: number; lost: number };
    // When each response's run began (its first attempt), from its POST; and over how long all of them began.
    const starts = await db.query(
      `SELECT extract(epoch FROM a.started_at - b.created_at) * 1000 AS wait,
              extract(epoch FROM a.started_at) * 1000 AS at
         FROM background_responses b JOIN background_response_attempts a ON a.response_id = b.id AND a.attempt = 1
        WHERE b.id = ANY($1)`,
      [[...ids.values()]],
    );
    const waits = starts.rows.map((r) => Number(r.wait)).sort((a, b) => a - b);
    const startAt = starts.rows.map((r) => Number(r.at));
    const startSpan = (Math.max(...startAt) - Math.min(...startAt)) / 1000;
    const lag: number[] = [];
    for (const [marker, id] of ids) {
      const up = proxy.ended.get(marker);
      const end = endedAt.get(id);
      if (up && end) lag.push(end - up);
    }
    lag.sort((a, b) => a - b);
    const last = Math.max(...endedAt.values());
    const events = (await counts()).events - base.events;
    const seconds = (last - t0) / 1000;
    return [
      `| Measure | Value |`,
      `|---|---|`,
      `| responses | ${n} POSTed in ${round(postedMs / 1000)} s (concurrency 50); ${completed} completed |`,
      `| in flight at once (queued + in_progress, peak) | ${peakOpen} |`,
      `| upstream calls open at once (peak) | ${proxy.peakOpen()} |`,
      `| upstream attempts | ${attempts.n} (${attempts.lost} lost and retried) |`,
      `| POST to the run's start | p50 ${Math.round(pct(waits, 50))} ms, p99 ${Math.round(pct(waits, 99))} ms; ` +
        `all ${waits.length} runs began within ${round(startSpan)} s (${round(waits.length / startSpan)} per second) |`,
      `| load average (1 min) at the end | ${round(os.loadavg()[0])} |`,
      `| worker RSS | idle ${round(idle)} MB, peak ${round(peak)} MB |`,
      `| events stored | ${events} in ${round(seconds)} s: ${Math.round(events / seconds)} per second |`,
      `| upstream's last event to completed | p50 ${Math.round(pct(lag, 50))} ms, ` +
        `p99 ${Math.round(pct(lag, 99))} ms, max ${Math.round(lag[lag.length - 1])} ms (${lag.length} responses) |`,
    ].join('\n');
  } finally {
    for (const c of cleanup) await c().catch((e) => log(`cleanup: ${(e as Error).message}`));
  }
}

if (require.main === module) {
  main().then(
    (md) => {
      process.stdout.write(md + '\n');
      process.exit(0);
    },
    (e) => {
      process.stderr.write(`background responses bench failed: ${(e as Error).stack ?? e}\n`);
      process.exit(1);
    },
  );
}
