import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { projectRoot } from '../projectRoot';
import { PG_ERROR, pgErrorCode } from './pgErrors';

export const migrationsDir = (): string => path.join(projectRoot(), 'src', 'db', 'migrations');

/**
 * Applies src/db/migrations/NNN_name.sql in order, each in its own transaction. A session advisory lock
 * serialises concurrent starters (API and worker booting together), so each file runs exactly once.
 */
export async function migrate(databaseUrl: string): Promise<string[]> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  const applied: string[] = [];
  try {
    await client.query('SELECT pg_advisory_lock(727274001)');
    await client.query(
      `CREATE TABLE IF NOT EXISTS schema_migrations
         (version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`,
    );
    const done = new Set(
      (await client.query('SELECT version FROM schema_migrations')).rows.map((r) => r.version as string),
    );
    const files = fs
      .readdirSync(migrationsDir())
      .filter((f) => /^\d+_.*\.sql$/.test(f))
      .sort();
    for (const f of files) {
      if (done.has(f)) continue;
      const sql = fs.readFileSync(path.join(migrationsDir(), f), 'utf8');
      await client.query('BEGIN');
      try {
        await client.query(sql);
        await client.query('INSERT INTO schema_migrations(version) VALUES ($1)', [f]);
        await client.query('COMMIT');
        applied.push(f);
      } catch (e) {
        await client.query('ROLLBACK');
        throw new Error(`migration ${f} failed: ${(e as Error).message}`);
      }
    }
  } finally {
    await client.query('SELECT pg_advisory_unlock(727274001)').catch(() => undefined);
    await client.end();
  }
  return applied;
}

/** Creates the database named in the URL if it does not exist (connects to the `postgres` db to do so). */
export async function ensureDatabase(databaseUrl: string): Promise<void> {
  const url = new URL(databaseUrl);
  const name = decodeURIComponent(url.pathname.replace(/^\//, ''));
  if (!name) return;
  const admin = new URL(databaseUrl);
  admin.pathname = '/postgres';
  const c = new pg.Client({ connectionString: admin.toString() });
  await c.connect();
  try {
    const r = await c.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (r.rowCount === 0) {
      await c.query(`CREATE DATABASE "${name.replace(/"/g, '""')}"`).catch((e: any) => {
        if (pgErrorCode(e) !== PG_ERROR.duplicateDatabase) throw e; // created concurrently
      });
    }
  } finally {
    await c.end();
  }
}
