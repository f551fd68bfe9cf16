import type { Catalog, ModelConfig } from '../catalog';
import type { ModelRouter } from './modelRouter';

/**
 * Whether a model can be served now, as the router's deployments' health says: work that is not in a hurry (a
 * batch's lines, src/jobs/batches/activities.ts) waits while every deployment that could answer is cooling down,
 * instead of sending its requests into the router's last-resort tries, which interactive traffic gets.
 */
export interface CoolingDeps {
  router: ModelRouter;
  catalog: Catalog;
}

/**
 * When every deployment that could answer requests on `model` (its own and its fallbacks') is cooling down, the
 * epoch ms the first one comes back; 0 when one is available.
 */
export function coolingUntil(deps: CoolingDeps, model: ModelConfig, now = Date.now()): number {
  const keys = new Set<string>();
  for (const m of deps.router.candidates(model))
    for (const d of deps.catalog.deployments(m)) keys.add(`${d.id}\n${d.provider}\n${d.upstreamModel}`);
  let first = Infinity;
  let seen = 0;
  for (const s of deps.router.states) {
    const d = s.deployment;
    if (!keys.has(`${d.id}\n${d.provider}\n${d.upstreamModel}`)) continue;
    seen++;
    if (!s.coolingDown(now)) return 0;
    first = Math.min(first, s.until);
  }
  return seen ? first : 0;
}

/** Waits while every deployment of the model cools down (in steps of at most a second; `signal` ends it). */
export async function waitForHealthy(deps: CoolingDeps, model: ModelConfig, signal: AbortSignal): Promise<void> {
  for (;;) {
    const until = coolingUntil(deps, model);
    const now = Date.now();
    if (until <= now || signal.aborted) return;
    await new Promise((r) => setTimeout(r, Math.min(1000, until - now)));
  }
}
