/** Retry, fallback and cooldown settings (ROUTING_* env vars), read once at start-up. */
export interface RoutingSettings {
  /** Upstream tries per request, first try, retries and fallbacks together. */
  maxAttempts: number;
  /** No new try starts this long after the first one began (each try is also bounded by its provider's timeout). */
  maxTimeMs: number;
  /** First cooldown of a failed deployment; doubles with each further failure in a row... */
  cooldownBaseMs: number;
  /** ...up to this. A Retry-After is honoured up to this bound too. */
  cooldownMaxMs: number;
  /**
   * Requests sharing a prompt cache go to one deployment (./affinity.ts); ROUTING_PROMPT_AFFINITY=false turns it
   * off (the bench compares both). Absent: on.
   */
  promptAffinity?: boolean;
}

function int(env: NodeJS.ProcessEnv, name: string, def: number, min: number): number {
  const v = env[name];
  if (v === undefined || v === '') return def;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min)
    throw new Error(`${name} must be an integer >= ${min}, got ${JSON.stringify(v)}`);
  return n;
}

export function loadRoutingSettings(env: NodeJS.ProcessEnv = process.env): RoutingSettings {
  return {
    maxAttempts: int(env, 'ROUTING_MAX_ATTEMPTS', 3, 1),
    maxTimeMs: int(env, 'ROUTING_MAX_TIME_MS', 30_000, 0),
    cooldownBaseMs: int(env, 'ROUTING_COOLDOWN_BASE_MS', 5_000, 1),
    cooldownMaxMs: int(env, 'ROUTING_COOLDOWN_MAX_MS', 300_000, 1),
    promptAffinity: (env.ROUTING_PROMPT_AFFINITY ?? 'true') !== 'false',
  };
}
