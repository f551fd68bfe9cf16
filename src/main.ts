import fs from 'node:fs';
import path from 'node:path';
import { loadConfig } from './config';
import { projectRoot } from './projectRoot';
import { startApi } from './server';
import { startWorker } from './worker';
import { ensurePortFree, PortBusyError } from './runtime/ports';
import { startEmbeddedPostgres } from './runtime/embeddedPostgres';
import { startEmbeddedTemporal, TemporalUnavailable } from './runtime/embeddedTemporal';
import { seedDemo, type DemoSeed } from './runtime/demoSeed';

/**
 * `npm start`: the whole gateway on one machine with no other set-up. Starts (or uses, when configured) Postgres
 * and a Temporal dev server, then the provider emulator, the API and the video worker in this process, seeds a
 * demo account and prints how to use it. Ctrl-C stops everything in reverse order. State lives in .data/.
 * Production runs `npm run api` and `npm run worker` against real infrastructure instead.
 */

function intEnv(name: string, def: number): number {
  const v = process.env[name];
  if (v === undefined || v === '') return def;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0 || n > 65535)
    throw new StartupError(`${name} must be a port number (0-65535), got ${JSON.stringify(v)}`);
  return n;
}

/** A start-up failure the user can act on: printed as one message, without a stack trace. */
class StartupError extends Error {}

/** How long one component may take to stop before the next is stopped (the worker: beyond its longest grace). */
const STOP_TIMEOUT_MS = 20_000;

/** Things started so far, stopped in reverse order exactly once (on Ctrl-C, SIGTERM or a failed start). */
class Lifecycle {
  private stack: { name: string; stop: () => Promise<void>; timeoutMs: number }[] = [];
  stopping = false;

  /** Registers a started component; if shutdown already began, stops it at once and reports false. */
  async started(name: string, stop: () => Promise<void>, timeoutMs = STOP_TIMEOUT_MS): Promise<boolean> {
    if (this.stopping) {
      await stopOne(name, stop, timeoutMs);
      return false;
    }
    this.stack.push({ name, stop, timeoutMs });
    return true;
  }

  async stopAll(): Promise<void> {
    this.stopping = true;
    while (this.stack.length) {
      const { name, stop, timeoutMs } = this.stack.pop()!;
      await stopOne(name, stop, timeoutMs);
    }
  }
}

async function stopOne(name: string, stop: () => Promise<void>, timeoutMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      stop(),
      new Promise<void>((_, rej) => {
        timer = setTimeout(() => rej(new Error(`did not stop within ${timeoutMs / 1000} s`)), timeoutMs);
      }),
    ]);
  } catch (e) {
    console.error(`  ${name}: ${e instanceof Error ? e.message : String(e)}`);
  } finally {
    clearTimeout(timer);
  }
}

const groupDigits = (n: number) => String(n).replace(/\B(?=(\d{3})+(?!\d))/g, '.');

function banner(o: {
  apiUrl: string;
  demo: DemoSeed;
  temporalUi: string;
  databaseUrl: string;
  pgNote: string;
  emulatorUrl: string;
  chatModel?: string;
  /** The emulator's bank and VNPay, when no real one is configured. */
  bankUrl?: string;
}): string {
  const c = o.demo.console;
  const consoleLine =
    `${o.apiUrl}/console   ` +
    `(customer ${c.email} / ${c.password}; operator ${c.operatorEmail} / ${c.operatorPassword})`;
  const lines = [
    '',
    'Model gateway is running (embedded mode).',
    '',
    `  API base URL       ${o.apiUrl}/v1`,
    `  API key            ${o.demo.apiKey}`,
    `  Admin key          ${o.demo.adminKey}   (/v1/organization/*: projects, keys, usage, audit log)`,
    `  Demo account       ${o.demo.accountId}   available ${groupDigits(o.demo.balanceVnd)} ₫`,
    `  Console            ${consoleLine}`,
    `  Temporal UI        ${o.temporalUi}`,
    `  Postgres           ${o.databaseUrl}${o.pgNote}`,
    `  Provider emulator  ${o.emulatorUrl}`,
    ...(o.bankUrl ? [`  Bank (emulated)    ${o.bankUrl}   (top-ups by VietQR and VNPay; docs/payments.md)`] : []),
    '',
  ];
  if (o.chatModel) {
    lines.push(
      'Try it:',
      `  curl ${o.apiUrl}/v1/chat/completions -H "Authorization: Bearer ${o.demo.apiKey}" \\`,
      `    -H "Content-Type: application/json" ` +
        `-d '{"model":"${o.chatModel}","messages":[{"role":"user","content":"Hello"}]}'`,
      '',
    );
  }
  lines.push(
    `Operator CLI: DATABASE_URL='${o.databaseUrl}' npm run admin -- list-accounts`,
    'Press Ctrl-C to stop.',
    '',
  );
  return lines.join('\n');
}

async function main(life: Lifecycle): Promise<void> {
  const root = projectRoot();
  const dataDir = path.resolve(process.env.DATA_DIR || path.join(root, '.data'));
  fs.mkdirSync(dataDir, { recursive: true });
  const verbose = (process.env.LOG_LEVEL ?? '') === 'debug';
  const childLog = (prefix: string) =>
    verbose ? (line: string) => process.stderr.write(`[${prefix}] ${line}`) : undefined;

  // Every port we will bind, checked before anything starts.
  const port = intEnv('PORT', 8080);
  const host = process.env.HOST || '0.0.0.0';
  const useExternalDb = !!process.env.DATABASE_URL;
  const useExternalTemporal = !!process.env.TEMPORAL_ADDRESS;
  const pgPort = intEnv('EMBEDDED_PG_PORT', 54329);
  const temporalPort = intEnv('TEMPORAL_PORT', 7233);
  const temporalUiPort = intEnv('TEMPORAL_UI_PORT', 8233);
  const emulatorPort = intEnv('EMULATOR_PORT', 0);
  await ensurePortFree(port, 'gateway API', 'PORT', host);
  if (!useExternalDb) await ensurePortFree(pgPort, 'embedded Postgres', 'EMBEDDED_PG_PORT');
  if (!useExternalTemporal) {
    await ensurePortFree(
      temporalPort,
      'Temporal dev server',
      'TEMPORAL_PORT (or set TEMPORAL_ADDRESS to use a running Temporal)',
    );
    await ensurePortFree(temporalUiPort, 'Temporal UI', 'TEMPORAL_UI_PORT');
  }
  await ensurePortFree(emulatorPort, 'provider emulator', 'EMULATOR_PORT');

  console.log('Starting the model gateway (embedded mode); state in ' + dataDir);
  // Postgres and Temporal start in parallel: they are independent and each takes a few seconds.
  const pgStart = (async () => {
    if (useExternalDb) return { url: process.env.DATABASE_URL!, note: ' (DATABASE_URL)' };
    const pg = await startEmbeddedPostgres({
      dataDir: path.join(dataDir, 'pg'),
      port: pgPort,
      log: childLog('postgres'),
    });
    if (!(await life.started('embedded Postgres', pg.stop))) throw new StartupError('stopped during start-up');
    const shown = pg.dataDir.startsWith(root + path.sep) ? path.relative(root, pg.dataDir) : pg.dataDir;
    return { url: pg.url, note: ` (embedded, data in ${shown})` };
  })();
  const temporalStart = (async () => {
    if (useExternalTemporal)
      return {
        address: process.env.TEMPORAL_ADDRESS!,
        uiUrl: process.env.TEMPORAL_UI_URL || '(TEMPORAL_UI_URL not set)',
      };
    const t = await startEmbeddedTemporal({
      dbFile: path.join(dataDir, 'temporal.db'),
      port: temporalPort,
      uiPort: temporalUiPort,
      downloadDir: path.join(dataDir, 'temporal-cli'),
      log: childLog('temporal'),
      say: (line) => console.log(line),
    });
    if (!(await life.started('Temporal dev server', t.stop))) throw new StartupError('stopped during start-up');
    return { address: t.address, uiUrl: t.uiUrl };
  })();
  const [pgOut, tOut] = await Promise.allSettled([pgStart, temporalStart]);
  if (pgOut.status === 'rejected') throw pgOut.reason;
  if (tOut.status === 'rejected') throw tOut.reason;
  const db = pgOut.value;
  const temporal = tOut.value;

  // The emulator lives beside src/ and is left out of the production image: only npm start loads it.
  const { startEmulator } = await import('../emulator/server');
  const emulator = await startEmulator({ port: emulatorPort });
  if (!(await life.started('provider emulator', emulator.close))) return;

  // The catalog resolves ${EMULATOR_URL} and loadConfig reads the rest from the environment.
  process.env.EMULATOR_URL = emulator.url;
  // The default catalog reads the emulator's video bills with these (its access key; any token).
  process.env.EMULATOR_BYTEPLUS_KEY ??= `${(await import('../emulator/billingExports')).BYTEPLUS_ACCESS_KEY}:emulator`;
  process.env.EMULATOR_BIGQUERY_TOKEN ??= 'emulator';
  process.env.DATABASE_URL = db.url;
  process.env.TEMPORAL_ADDRESS = temporal.address;
  process.env.TEMPORAL_UI_URL = temporal.uiUrl;
  // Top-ups with no bank configured: the emulator's bank and VNPay (emulator/bank.ts).
  const { connectEmulatedPayments, emulatedPaymentsEnv } = await import('../emulator/bank');
  const payments = emulatedPaymentsEnv(emulator.url, process.env);
  Object.assign(process.env, payments);
  const config = loadConfig();

  const api = await startApi(config); // creates the database if needed and applies migrations
  if (!(await life.started('API', api.close))) return;
  // In the API's process: its video submissions count on the API's router, so they show on the API's /metrics.
  const worker = await startWorker(config, { router: api.deps.router });
  // Its stop waits for the activities in flight (the background runs: BACKGROUND_SHUTDOWN_GRACE_MS; the jobs and
  // the webhook tries: JOBS_SHUTDOWN_GRACE_MS; the graces run at once) while the API, the emulator, Temporal and
  // Postgres they use still run: those stop after it, so its timeout is the longest grace and then some.
  const longestGrace = Math.max(config.backgroundResponses.shutdownGraceMs, config.jobs.shutdownGraceMs);
  const workerStopMs = longestGrace + STOP_TIMEOUT_MS;
  if (!(await life.started('worker', worker.close, workerStopMs))) return;

  const demo = await seedDemo(api.deps.db, {
    stateFile: path.join(dataDir, 'demo.json'),
    balanceVnd: Number(process.env.DEMO_BALANCE_VND ?? 5_000_000),
  });
  const apiUrl = (process.env.PUBLIC_BASE_URL || `http://127.0.0.1:${port}`).replace(/\/$/, '');
  await connectEmulatedPayments(emulator.url, apiUrl, payments);
  console.log(
    banner({
      apiUrl,
      demo,
      temporalUi: temporal.uiUrl,
      databaseUrl: db.url,
      pgNote: db.note,
      emulatorUrl: emulator.url,
      ...(payments.SEPAY_WEBHOOK_API_KEY ? { bankUrl: `${emulator.url}/bank` } : {}),
      chatModel: api.deps.catalog.models.find((m) => m.mode === 'chat')?.id,
    }),
  );
}

function describe(e: unknown): string {
  if (e instanceof StartupError || e instanceof PortBusyError || e instanceof TemporalUnavailable) return e.message;
  if (e instanceof Error) return e.message;
  return String(e);
}

if (require.main === module) {
  const life = new Lifecycle();
  let exiting = false;
  let firstSignalAt = 0;
  const shutdown = (code: number) => {
    if (exiting) return;
    exiting = true;
    firstSignalAt = Date.now();
    console.log('\nStopping the gateway...');
    life.stopAll().then(
      () => {
        console.log('Stopped.');
        process.exit(code);
      },
      () => process.exit(1),
    );
  };
  const onSignal = () => {
    // One Ctrl-C often arrives twice (from the terminal and forwarded by npm): only a later one forces the exit.
    if (exiting && Date.now() - firstSignalAt > 2000) {
      console.error('Forced exit.');
      process.exit(130);
    }
    if (!exiting) shutdown(0);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  process.on('uncaughtException', (e) => {
    console.error(`Fatal error: ${describe(e)}`);
    shutdown(1);
  });
  main(life).catch((e) => {
    if (exiting) return;
    const demoHint =
      e instanceof Error && 'code' in e && (e as { code?: string }).code === 'EADDRINUSE'
        ? ' (a port is already in use)'
        : '';
    console.error(`\nThe gateway could not start${demoHint}: ${describe(e)}`);
    shutdown(1);
  });
}
