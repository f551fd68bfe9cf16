import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { projectRoot } from '../src/projectRoot';
import { createPool } from '../src/db/pool';
import { startEmulator } from '../emulator/server';
import { findTemporalCli, startTemporalDevServer } from '../src/runtime/temporalDevServer';
import { createBenchDb } from './lib/db';
import { freePort, peakRssMb, resetPeakRss, rssMb, RssSampler, stopChild } from './lib/proc';

/**
 * Batch bench (`node dist/bench/batch.js`): the API and the worker as separate processes, a Temporal dev server
 * (TEMPORAL_ADDRESS, or one started here), the emulator at zero latency. It uploads a batch input file of
 * BENCH_BATCH_ITEMS (default 50,000) small chat requests, runs the batch through the routed path, and reports items
 * per second (creation to completed), the worker's peak RSS against its idle RSS, the API's peak RSS during the
 * upload (BENCH_BATCH_PAD pads each prompt, for a file near the 200 MB limit), and whether the money adds up
 * (charged = sum of the usage records, nothing held).
 */

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const round = (n: number, d = 1) => Math.round(n * 10 ** d) / 10 ** d;

function startProc(
  script: string,
  env: NodeJS.ProcessEnv,
  log: string,
): { child: ChildProcess; stop(): Promise<void> } {
  const fd = fs.openSync(log, 'a');
  const child = spawn(process.execPath, ['--enable-source-maps', script], {
    env: { ...process.env, ...env },
    stdio: ['ignore', fd, fd],
  });
  fs.closeSync(fd);
  return {
    child,
    // SIGTERM, then SIGKILL after 15 s: a process that had to be killed is gone all the same.
    stop: () => stopChild(child, () => child.kill('SIGTERM')).catch(() => undefined),
  };
}

async function main(): Promise<void> {
  const items = Number(process.env.BENCH_BATCH_ITEMS ?? 50_000);
  // Padding per prompt (bytes): BENCH_BATCH_PAD=4000 makes a 50,000-line file of about 200 MB (the upload limit).
  const pad = 'x'.repeat(Number(process.env.BENCH_BATCH_PAD ?? 0));
  const dist = path.resolve(__dirname, '..');
  const logs = path.join(projectRoot(), 'bench', 'results', 'logs');
  fs.mkdirSync(logs, { recursive: true });
  const cleanup: (() => Promise<unknown>)[] = [];
  const log = (s: string) => process.stderr.write(`[bench batch ${new Date().toISOString().slice(11, 19)}] ${s}\n`);
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
    const db = createPool(bench.url, 2);
    cleanup.push(() => db.end());
    const emulator = await startEmulator();
    cleanup.push(() => emulator.close());
    const storageDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-bench-batch-'));
    cleanup.push(async () => fs.rmSync(storageDir, { recursive: true, force: true }));
    const port = await freePort();
    const env: NodeJS.ProcessEnv = {
      DATABASE_URL: bench.url,
      TEMPORAL_ADDRESS: temporalAddress,
      TEMPORAL_TASK_QUEUE: `batch-bench-${randomUUID()}`,
      EMULATOR_URL: emulator.url,
      STORAGE_DRIVER: 'fs',
      STORAGE_DIR: storageDir,
      HOST: '127.0.0.1',
      PORT: String(port),
      LOG_LEVEL: 'warn',
      WORKER_METRICS_PORT: 'off',
      CATALOG_PATH: path.join(projectRoot(), 'config', 'catalog.json'),
    };
    const url = `http://127.0.0.1:${port}`;
    const api = startProc(path.join(dist, 'src', 'server.js'), env, path.join(logs, 'batch-api.log'));
    cleanup.unshift(() => api.stop());
    const worker = startProc(path.join(dist, 'src', 'worker.js'), env, path.join(logs, 'batch-worker.log'));
    cleanup.unshift(() => worker.stop());
    for (let i = 0; ; i++) {
      if (i > 600) throw new Error('API did not start');
      if (
        await fetch(`${url}/healthz`).then(
          (r) => r.ok,
          () => false,
        )
      )
        break;
      await sleep(100);
    }
    await sleep(3000); // the worker bundles its workflows
    const auth = { authorization: `Bearer ${bench.key}` };
    const lines: string[] = [];
    for (let i = 0; i < items; i++)
      lines.push(
        JSON.stringify({
          custom_id: `r${i}`,
          method: 'POST',
          url: '/v1/chat/completions',
          body: { model: 'gpt-4o-mini', messages: [{ role: 'user', content: `item ${i} ${pad}` }], max_tokens: 16 },
        }),
      );
    const file = Buffer.from(lines.join('\n') + '\n');
    const form = new FormData();
    form.append('purpose', 'batch');
    form.append('file', new Blob([file]), 'bench.jsonl');
    const apiIdle = rssMb(api.child.pid!);
    resetPeakRss(api.child.pid!);
    const tUp = Date.now();
    const up = await fetch(`${url}/v1/files`, { method: 'POST', headers: auth, body: form });
    const f = (await up.json()) as { id: string };
    if (!up.ok) throw new Error(`upload answered ${up.status}: ${JSON.stringify(f)}`);
    const uploadS = (Date.now() - tUp) / 1000;
    const apiPeak = peakRssMb(api.child.pid!);

    const wPid = worker.child.pid!;
    const idle = rssMb(wPid);
    const hwm = resetPeakRss(wPid);
    const sampler = new RssSampler(wPid, 100);
    sampler.start();
    log(`uploaded ${round(file.length / 1048576)} MB in ${round(uploadS, 2)} s; running ${items} items`);
    const t0 = Date.now();
    const cr = await fetch(`${url}/v1/batches`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ input_file_id: f.id, endpoint: '/v1/chat/completions', completion_window: '24h' }),
    });
    const b = (await cr.json()) as { id: string };
    if (!cr.ok) throw new Error(`create answered ${cr.status}: ${JSON.stringify(b)}`);
    let last: any;
    for (;;) {
      last = await (await fetch(`${url}/v1/batches/${b.id}`, { headers: auth })).json();
      if (['completed', 'failed', 'expired', 'cancelled'].includes(last.status)) break;
      await sleep(500);
    }
    const seconds = (Date.now() - t0) / 1000;
    const peak = Math.max(sampler.stop(), hwm ? peakRssMb(wPid) : 0);
    const money = await db.query(
      `SELECT (SELECT COALESCE(sum(cost_vnd), 0) FROM usage_records)::bigint AS usage,
              (SELECT COALESCE(sum(amount), 0) FROM ledger_events WHERE kind = 'charged')::bigint AS charged,
              (SELECT held FROM accounts WHERE id = $1)::bigint AS held`,
      [bench.accountId],
    );
    const m = money.rows[0];
    const ok = last.status === 'completed' && last.request_counts.completed === items;
    const moneyOk = Number(m.usage) === Number(m.charged) && Number(m.held) === 0;
    const out = [
      `items ${items}, status ${last.status}, ` +
        `completed ${last.request_counts.completed}, failed ${last.request_counts.failed}`,
      `items per second ${round(items / seconds)} (${round(seconds)} s from POST /v1/batches to completed)`,
      `worker RSS idle ${round(idle)} MB, peak ${round(peak)} MB (+${round(peak - idle)} MB)`,
      `upload ${round(file.length / 1048576)} MB in ${round(uploadS, 2)} s; API RSS idle ${round(apiIdle)} MB, ` +
        `peak ${round(apiPeak)} MB`,
      `money: charged ${m.charged} VND = usage ${m.usage} VND, held ${m.held}: ${moneyOk ? 'OK' : 'MISMATCH'}`,
    ];
    process.stdout.write(out.join('\n') + '\n');
    if (!ok || !moneyOk) process.exitCode = 1;
  } finally {
    for (const c of cleanup) await c().catch((e) => log(`cleanup: ${(e as Error).message}`));
  }
}

if (require.main === module)
  main().catch((e) => {
    process.stderr.write(`batch bench failed: ${(e as Error).stack ?? e}\n`);
    process.exit(1);
  });
