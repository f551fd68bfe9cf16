import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { startOtlpReceiver, type ReceivedSpan } from '../test/support/otlpReceiver';
import { startEmulator } from '../emulator/server';
import { createPool } from '../src/db/pool';
import { ensureDatabase, migrate } from '../src/db/migrate';
import { createAccount, topUp } from '../src/billing/ledger';
import { createApiKey } from '../src/auth/apiKeys';

/**
 * Captures one real trace of a video job, for docs/observability.md: `node dist/bench/traceCapture.js`. Runs the
 * production processes (dist/src/server.js, dist/src/worker.js) against the provider emulator, a Temporal server
 * (TEMPORAL_ADDRESS, default 127.0.0.1:7233) and Postgres (CAPTURE_DATABASE_URL), tracing to an OTLP/HTTP receiver
 * in this process; submits a Veo job, restarts the worker while the job is being polled, and prints the job's
 * trace as a tree of spans with their start offsets and durations once the job has completed.
 */

const env = process.env;
const dist = path.join(__dirname, '..');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function start(script: string, extra: Record<string, string>): ChildProcess {
  const c = spawn(process.execPath, [path.join(dist, 'src', script)], {
    env: { ...env, ...extra },
    stdio: ['ignore', env.CAPTURE_LOGS ? 'inherit' : 'ignore', 'inherit'],
  });
  return c;
}

async function stop(c: ChildProcess): Promise<void> {
  if (c.exitCode !== null) return;
  const exited = new Promise((r) => c.once('exit', r));
  c.kill('SIGTERM');
  await exited;
}

/** The spans of one trace as an indented tree: start offset and duration in ms, name, service, chosen attributes. */
export function renderTree(spans: ReceivedSpan[]): string {
  const t0 = spans.reduce((m, s) => (s.startNs < m ? s.startNs : m), spans[0].startNs);
  const ids = new Set(spans.map((s) => s.spanId));
  const children = new Map<string, ReceivedSpan[]>();
  for (const s of spans) {
    const p = ids.has(s.parentSpanId) ? s.parentSpanId : '';
    children.set(p, [...(children.get(p) ?? []), s]);
  }
  const keys = [
    'http.route',
    'http.response.status_code',
    'gen_ai.operation.name',
    'gen_ai.provider.name',
    'gen_ai.request.model',
    'gateway.deployment',
    'gateway.try',
    'gateway.cost_vnd',
    'error.type',
  ];
  const lines: string[] = [];
  const walk = (parent: string, depth: number) => {
    for (const s of (children.get(parent) ?? []).sort((a, b) => (a.startNs < b.startNs ? -1 : 1))) {
      const at = Number(s.startNs - t0) / 1e6;
      const ms = Number(s.endNs - s.startNs) / 1e6;
      const attrs = keys
        .filter((k) => s.attributes[k] !== undefined)
        .map((k) => `${k}=${s.attributes[k]}`)
        .join(' ');
      const who = String(s.resource['service.name']);
      const offset = `+${at.toFixed(0)} ms`.padStart(10);
      const duration = `${ms.toFixed(1)} ms`.padStart(10);
      lines.push(`${offset} ${duration}  ${'  '.repeat(depth)}${s.name}  [${who}]${attrs ? `  ${attrs}` : ''}`);
      walk(s.spanId, depth + 1);
    }
  };
  walk('', 0);
  return lines.join('\n');
}

async function main(): Promise<void> {
  const rx = await startOtlpReceiver();
  const emulator = await startEmulator();
  const databaseUrl = env.CAPTURE_DATABASE_URL ?? `postgres://postgres@127.0.0.1:5432/gw_trace_capture_${Date.now()}`;
  await ensureDatabase(databaseUrl);
  await migrate(databaseUrl);
  const db = createPool(databaseUrl, 2);
  const port = 18000 + Math.floor(Math.random() * 1000);
  const common = {
    DATABASE_URL: databaseUrl,
    EMULATOR_URL: emulator.url,
    TEMPORAL_TASK_QUEUE: `trace-capture-${randomUUID()}`,
    LOG_LEVEL: 'warn',
    OTEL_EXPORTER_OTLP_ENDPOINT: rx.url,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
    OTEL_BSP_SCHEDULE_DELAY: '200',
    VIDEO_POLL_INITIAL_MS: '1000',
    VIDEO_POLL_MAX_MS: '2000',
    WORKER_METRICS_PORT: '0',
    PORT: String(port),
    HOST: '127.0.0.1',
  };
  emulator.control.settings.videoPollsToComplete = 4;
  const api = start('server.js', { ...common, OTEL_SERVICE_NAME: 'model-gateway-api' });
  let worker = start('worker.js', { ...common, OTEL_SERVICE_NAME: 'model-gateway-worker' });
  try {
    const accountId = await createAccount(db, 'trace capture');
    await topUp(db, { accountId, amount: 1_000_000, idempotencyKey: `capture:${accountId}` });
    const key = (await createApiKey(db, accountId, 'capture')).key;
    const base = `http://127.0.0.1:${port}`;
    for (let i = 0; ; i++) {
      if (
        await fetch(`${base}/healthz`).then(
          (r) => r.ok,
          () => false,
        )
      )
        break;
      if (i > 300) throw new Error('API did not start');
      await sleep(100);
    }
    const auth = { authorization: `Bearer ${key}` };
    const res = await fetch(`${base}/v1/videos`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'veo-3.1-generate-preview', prompt: 'a lighthouse at dusk', seconds: 4 }),
    });
    const job = (await res.json()) as { id: string };
    if (res.status !== 202) throw new Error(`POST /v1/videos: ${res.status} ${JSON.stringify(job)}`);
    // The worker is restarted (SIGTERM, a new process) once the provider has been polled: the job carries on.
    for (
      let i = 0;
      emulator.control.requests.filter((r) => r.method === 'GET' && r.path.includes('operations')).length < 1;
      i++
    ) {
      if (i > 600) throw new Error('no poll seen');
      await sleep(100);
    }
    await stop(worker);
    worker = start('worker.js', { ...common, OTEL_SERVICE_NAME: 'model-gateway-worker' });
    let status = '';
    for (let i = 0; i < 600 && !['completed', 'failed', 'expired'].includes(status); i++) {
      await sleep(200);
      status = ((await (await fetch(`${base}/v1/videos/${job.id}`, { headers: auth })).json()) as { status: string })
        .status;
    }
    if (status !== 'completed') throw new Error(`job ended ${status}`);
    await sleep(1500);
    await Promise.all([stop(worker), stop(api)]);
    const post = rx.spans.find((s) => s.name === 'POST /v1/videos')!;
    console.log(`job ${job.id}, trace ${post.traceId}\n`);
    console.log(renderTree(rx.trace(post.traceId)));
  } finally {
    await Promise.all([stop(worker), stop(api)]);
    await db.end();
    await emulator.close();
    await rx.close();
  }
}

if (require.main === module) {
  main().then(
    () => process.exit(0),
    (e) => {
      console.error(e);
      process.exit(1);
    },
  );
}
