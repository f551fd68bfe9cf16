/**
 * Reading a job type's settings from the environment: every job type (video, batches, webhook deliveries,
 * background responses) keeps its timings in its own settings module and reads them through this.
 */

/** A positive number from the environment, or `def` when unset. */
export function num(env: NodeJS.ProcessEnv, name: string, def: number): number {
  const v = env[name];
  if (v === undefined || v === '') return def;
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} must be a positive number, got ${JSON.stringify(v)}`);
  return n;
}
