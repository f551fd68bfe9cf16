import type { Queryable } from './pool';

/** A round trip to Postgres (the readiness probe's check): resolves once it answers. */
export async function pingDb(db: Queryable): Promise<void> {
  await db.query('SELECT 1');
}
