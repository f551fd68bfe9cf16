import fs from 'node:fs';
import path from 'node:path';
import { randomBytes, randomUUID } from 'node:crypto';
import { fork } from 'node:child_process';
import { Pool } from 'undici';
import { projectRoot } from '../src/projectRoot';
import { KEY_PREFIX } from '../src/auth/apiKeys';
import { apiNodeFlags, askChild, distDir, forkTarget, freePort, rssMb } from './lib/proc';
import { createBenchDb } from './lib/db';

/**
 * Memory under hostile traffic: `node dist/bench/soak.js [requests]` (default 1,000,000; not part of `npm test`).
 * Runs the API process as `npm run api` does (dist/src/server.js with its Node flags; a preloaded hook,
 * bench/lib/gcHook.ts, answers forced-GC requests over IPC) against a fresh bench database and the emulator, and
 * sends a mix of what costs nothing to send and must cost the gateway nothing to remember: unknown models, paths,
 * API keys and video ids, each one distinct, among normal traffic (chat, streamed chat, model list). After every
 * SOAK_SAMPLE_EVERY requests (100,000) the load pauses, the gateway collects garbage and its RSS is read; the
 * result compares the last reading with the one after the first SOAK_BASELINE_AT (100,000; by then the code is
 * compiled and the bounded caches are full): within SOAK_MAX_GROWTH_MB (10).
 *
 * Environment: SOAK_CONNECTIONS (32), SOAK_SAMPLE_EVERY (100000), SOAK_BASELINE_AT (100000), SOAK_MAX_GROWTH_MB (10),
 * SOAK_HEAP_SNAPSHOTS (a directory: heap snapshots at the first and the last reading, to compare what is retained;
 * writing one inflates RSS, so a run that takes them does not measure it).
 */

const env = process.env;
const TOTAL = Number(process.argv[2] ?? 1_000_000);
const CONNECTIONS = Number(env.SOAK_CONNECTIONS ?? 32);
const EVERY = Number(env.SOAK_SAMPLE_EVERY ?? 100_000);
const MAX_GROWTH_MB = Number(env.SOAK_MAX_GROWTH_MB ?? 10);
const BASELINE_AT = Number(env.SOAK_BASELINE_AT ?? 100_000);
const SNAPSHOTS = env.SOAK_HEAP_SNAPSHOTS;

interface Req {
  kind: string;
  method: 'GET' | 'POST';
  path: string;
  headers: Record<string, string>;
  body?: string;
  expect: number;
}

const chatBody = (model: string, stream = false) =>
  JSON.stringify({
    model,
    max_tokens: 16,
    stream,
    messages: [{ role: 'user', content: 'Write one short sentence about the sea.' }],
  });

/** The i-th request of the mix: every hostile value is new (a counter and random bytes), as a fuzzer's would be. */
function request(i: number, key: string): Req {
  const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  const unique = `${i.toString(36)}-${randomBytes(6).toString('hex')}`;
  switch (i % 12) {
    case 0:
      return {
        kind: 'unknown model (chat)',
        method: 'POST',
        path: '/v1/chat/completions',
        headers: auth,
        body: chatBody(`soak-model-${unique}`),
        expect: 404,
      };
    case 1:
      return {
        kind: 'unknown model (messages)',
        method: 'POST',
        path: '/v1/messages',
        headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
        body: JSON.stringify({ model: `soak-${unique}`, max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }),
        expect: 404,
      };
    case 2:
      return { kind: 'unknown path', method: 'GET', path: `/v1/soak-${unique}/x`, headers: auth, expect: 404 };
    case 3:
      return {
        kind: 'unknown key',
        method: 'POST',
        path: '/v1/chat/completions',
        headers: { ...auth, authorization: `Bearer ${KEY_PREFIX}${randomBytes(24).toString('hex')}` },
        body: chatBody('gpt-4o-mini'),
        expect: 401,
      };
    case 4:
      return {
        kind: 'unknown key (x-api-key)',
        method: 'GET',
        path: '/v1/models',
        headers: { 'x-api-key': `${KEY_PREFIX}${randomBytes(20).toString('hex')}` },
        expect: 401,
      };
    case 5:
      return {
        kind: 'unknown video id (uuid)',
        method: 'GET',
        path: `/v1/videos/${randomUUID()}`,
        headers: auth,
        expect: 404,
      };
    case 6:
      return {
        kind: 'unknown video id (other)',
        method: 'GET',
        path: `/v1/videos/video_${unique}/content`,
        headers: auth,
        expect: 404,
      };
    case 7:
      return {
        kind: 'unknown model (model page)',
        method: 'GET',
        path: `/v1/models/soak-${unique}`,
        headers: auth,
        expect: 404,
      };
    case 8:
      return {
        kind: 'chat',
        method: 'POST',
        path: '/v1/chat/completions',
        headers: auth,
        body: chatBody('gpt-4o-mini'),
        expect: 200,
      };
    case 9:
      return {
        kind: 'chat (stream)',
        method: 'POST',
        path: '/v1/chat/completions',
        headers: auth,
        body: chatBody('gpt-4o-mini', true),
        expect: 200,
      };
    case 10:
      return { kind: 'models', method: 'GET', path: '/v1/models', headers: auth, expect: 200 };
    default:
      return {
        kind: 'unknown method',
        method: 'POST',
        path: `/v1/models?soak=${unique}`,
        headers: auth,
        body: '{}',
        expect: 405,
      };
  }
}

interface Reading {
  requests: number;
  rssMb: number;
  heapUsedMb: number;
  externalMb: number;
  seconds: number;
}

const mb = (bytes: number) => bytes / (1024 * 1024);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function main(): Promise<void> {
  const logs = path.join(projectRoot(), 'bench', 'results', 'logs');
  fs.mkdirSync(logs, { recursive: true });
  const emulator = await forkTarget('emulator', path.join(distDir(), 'targets', 'emulator.js'), {
    logFile: path.join(logs, 'soak-emulator.log'),
  });
  const db = await createBenchDb(1_000_000_000_000);
  const port = await freePort();
  const flags = [...apiNodeFlags(projectRoot()), '--expose-gc', '--require', path.join(distDir(), 'lib', 'gcHook.js')];
  const logFd = fs.openSync(path.join(logs, 'soak-api.log'), 'w');
  const api = fork(path.join(distDir(), '..', 'src', 'server.js'), [], {
    execArgv: flags,
    stdio: ['ignore', logFd, logFd, 'ipc'],
    env: {
      ...env,
      DATABASE_URL: db.url,
      EMULATOR_URL: emulator.url,
      HOST: '127.0.0.1',
      PORT: String(port),
      TEMPORAL_ADDRESS: 'off',
      NODE_ENV: 'production',
      LOG_LEVEL: env.LOG_LEVEL ?? 'warn',
    },
  });
  const url = `http://127.0.0.1:${port}`;
  const pool = new Pool(url, { connections: CONNECTIONS, pipelining: 1 });
  const byKind = new Map<string, { n: number; unexpected: number; statuses: Map<number, number> }>();
  const readings: Reading[] = [];
  const started = Date.now();
  try {
    for (let t = 0; ; t++) {
      try {
        if ((await fetch(`${url}/healthz`)).ok) break;
      } catch {}
      if (t > 300) throw new Error('the API process did not start (bench/results/logs/soak-api.log)');
      await sleep(100);
    }
    console.log(
      `soak: ${TOTAL} requests, ${CONNECTIONS} connections, ` +
        `node ${flags.join(' ')} dist/src/server.js (pid ${api.pid})`,
    );
    let next = 0;
    const one = async (i: number) => {
      const r = request(i, db.key);
      let status = 0;
      try {
        const res = await pool.request({ method: r.method, path: r.path, headers: r.headers, body: r.body });
        status = res.statusCode;
        await res.body.dump({ limit: Infinity });
      } catch {
        status = -1;
      }
      const k = byKind.get(r.kind) ?? { n: 0, unexpected: 0, statuses: new Map<number, number>() };
      byKind.set(r.kind, k);
      k.n++;
      k.statuses.set(status, (k.statuses.get(status) ?? 0) + 1);
      if (status !== r.expect) k.unexpected++;
    };
    while (next < TOTAL) {
      const end = Math.min(TOTAL, next + EVERY);
      await Promise.all(
        Array.from({ length: CONNECTIONS }, async () => {
          while (next < end) await one(next++);
        }),
      );
      await sleep(500); // let the credit batch of the last requests flush
      const m = await askChild<NodeJS.MemoryUsage & { forced: boolean }>(api, 'API process', 'gc', 60_000);
      if (!m.forced) throw new Error('the API process has no gc() (--expose-gc)');
      const reading = {
        requests: next,
        rssMb: rssMb(api.pid!),
        heapUsedMb: mb(m.heapUsed),
        externalMb: mb(m.external),
        seconds: (Date.now() - started) / 1000,
      };
      readings.push(reading);
      console.log(
        `${String(next).padStart(8)} requests  ${reading.seconds.toFixed(0).padStart(5)} s  ` +
          `RSS ${reading.rssMb.toFixed(1)} MB  heap used ${reading.heapUsedMb.toFixed(1)} MB  ` +
          `external ${reading.externalMb.toFixed(1)} MB`,
      );
      if (SNAPSHOTS && (readings.length === 1 || next >= TOTAL)) {
        fs.mkdirSync(SNAPSHOTS, { recursive: true });
        await askChild(api, 'API process', 'heap', 300_000, {
          file: path.join(SNAPSHOTS, `soak-${next}.heapsnapshot`),
        });
      }
    }
  } finally {
    await pool.close();
    api.kill('SIGTERM');
    await new Promise((r) => (api.exitCode !== null ? r(null) : api.once('exit', r)));
    await emulator.stop();
    await db.drop();
  }
  console.log('\nby kind: requests, statuses (unexpected)');
  for (const [kind, k] of byKind) {
    const statuses = [...k.statuses].map(([s, n]) => `${s}:${n}`).join(' ');
    const note = k.unexpected ? `  (${k.unexpected} unexpected)` : '';
    console.log(`  ${kind.padEnd(28)} ${String(k.n).padStart(8)}  ${statuses}${note}`);
  }
  const first = readings.find((r) => r.requests >= BASELINE_AT) ?? readings[0];
  const last = readings.at(-1)!;
  const growth = last.rssMb - first.rssMb;
  const unexpected = [...byKind.values()].reduce((a, k) => a + k.unexpected, 0);
  console.log(
    `\nRSS after GC: ${first.rssMb.toFixed(1)} MB after ${first.requests}, ` +
      `${last.rssMb.toFixed(1)} MB after ${last.requests} ` +
      `(${growth >= 0 ? '+' : ''}${growth.toFixed(1)} MB; limit +${MAX_GROWTH_MB} MB); ` +
      `heap used ${first.heapUsedMb.toFixed(1)} -> ${last.heapUsedMb.toFixed(1)} MB; ` +
      `${(last.requests / last.seconds || 0).toFixed(0)} requests/s`,
  );
  const ok = growth <= MAX_GROWTH_MB && unexpected === 0;
  const statusNote = unexpected ? ` (${unexpected} unexpected statuses)` : '';
  const rssNote = growth > MAX_GROWTH_MB ? ' (RSS grew too much)' : '';
  console.log(ok ? 'soak: OK' : `soak: FAILED${statusNote}${rssNote}`);
  process.exitCode = ok ? 0 : 1;
}

main().catch((e) => {
  console.error(e instanceof Error ? e.stack : String(e));
  process.exit(1);
});
