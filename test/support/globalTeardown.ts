import fs from 'node:fs';
import pg from 'pg';

export default async function globalTeardown(): Promise<void> {
  const state = (globalThis as any).__GW_STATE__ as
    { adminUrl: string; dbName: string; workerDbs: string[]; temporalPid?: number } | undefined;
  const embeddedPg = (globalThis as any).__GW_EMBEDDED_PG__ as { stop(): Promise<void>; dir: string } | undefined;
  if (!state) return;
  (globalThis as any).__GW_STATE__ = undefined; // torn down once, for whichever project of the run comes first
  if (state.temporalPid) {
    try {
      process.kill(state.temporalPid, 'SIGTERM');
    } catch {}
  }
  if (embeddedPg) {
    // This run's own server: stopping it and removing its files is the whole clean-up.
    await embeddedPg.stop();
    fs.rmSync(embeddedPg.dir, { recursive: true, force: true });
    return;
  }
  if (process.env.KEEP_TEST_DB === '1') return;
  const admin = new pg.Client({ connectionString: state.adminUrl });
  await admin.connect();
  for (const name of [...state.workerDbs, state.dbName])
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => undefined);
  await admin.end();
}
