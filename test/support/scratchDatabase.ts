import pg from 'pg';

/**
 * A database of its own beside the run's (named after it with `suffix`), dropped afterwards: for a test whose data
 * must not meet the shared database's (other budget zones, a migration run from an older schema). `run` gets its URL
 * and does its own migrating.
 */
export async function withScratchDatabase(suffix: string, run: (url: string) => Promise<void>): Promise<void> {
  const url = new URL(process.env.DATABASE_URL!);
  const name = `${url.pathname.slice(1)}_${suffix}`;
  const adminUrl = new URL(url);
  adminUrl.pathname = '/postgres';
  const admin = new pg.Client({ connectionString: adminUrl.toString() });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${name}`);
  url.pathname = '/' + name;
  try {
    await run(url.toString());
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  }
}
