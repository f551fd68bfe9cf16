import pg from 'pg';

export default async function globalTeardown(): Promise<void> {
  const state = (globalThis as any).__GW_STATE__ as
    { adminUrl: string; dbName: string; temporalPid?: number } | undefined;
  if (!state) return;
  if (state.temporalPid) {
    try {
      process.kill(state.temporalPid, 'SIGTERM');
    } catch {}
  }
  if (process.env.KEEP_TEST_DB === '1') return;
  const admin = new pg.Client({ connectionString: state.adminUrl });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${state.dbName} WITH (FORCE)`).catch(() => undefined);
  await admin.end();
}
