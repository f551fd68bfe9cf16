import type { AppDeps } from './deps';

/**
 * The readiness probe's checks (GET /readyz): Postgres and Temporal reachable, each within 2 s so a hung dependency
 * fails the probe rather than hanging it. Temporal off by configuration (a synchronous-only API process) is not a
 * failure; the rate limiter's mode is told, never a failure (without Redis the gateway limits per process).
 */
export async function readiness(
  deps: Pick<AppDeps, 'db' | 'temporal' | 'config' | 'limiter'>,
): Promise<{ ok: boolean; checks: Record<string, string> }> {
  const checks: Record<string, string> = {};
  const withTimeout = async <T>(p: Promise<T>): Promise<T> => {
    let timer: NodeJS.Timeout | undefined;
    try {
      return await Promise.race([
        p,
        new Promise<T>((_, rej) => {
          timer = setTimeout(() => rej(new Error('timeout after 2 s')), 2000);
        }),
      ]);
    } finally {
      clearTimeout(timer);
    }
  };
  try {
    await withTimeout(deps.db.query('SELECT 1'));
    checks.postgres = 'ok';
  } catch (e) {
    checks.postgres = `error: ${(e as Error).message}`;
  }
  if (deps.temporal) {
    try {
      await withTimeout(deps.temporal.workflowService.getSystemInfo({}));
      checks.temporal = 'ok';
    } catch (e) {
      checks.temporal = `error: ${(e as Error).message}`;
    }
  } else if (deps.config.temporalAddress === 'off') {
    checks.temporal = 'off';
  } else {
    checks.temporal = 'error: not configured';
  }
  const ok = Object.values(checks).every((v) => v === 'ok' || v === 'off');
  checks.ratelimit = deps.limiter.mode;
  return { ok, checks };
}
