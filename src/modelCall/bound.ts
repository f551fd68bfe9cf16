import type { Catalog, ModelConfig } from '../catalog';
import type { ModelRouter } from './modelRouter';

/**
 * The reservation bound of a request that may be answered by any of its model's candidates (deployments and
 * fallback models): the largest of their bounds, so a retry or fallback never needs more than was reserved.
 * `estimate` gets each candidate model and how many more bytes its payload may have than the one measured (its
 * deployments' upstream names may be longer than the primary's). One model with one deployment: just its bound.
 */
export function boundOverCandidates<B extends { maxCost: number }>(
  catalog: Catalog,
  router: ModelRouter,
  model: ModelConfig,
  estimate: (m: ModelConfig, extraBytes: number) => B,
): B {
  const candidates = router.candidates(model);
  if (candidates.length === 1 && catalog.deployments(model).length === 1) return estimate(model, 0);
  const base = Buffer.byteLength(JSON.stringify(model.upstreamModel));
  let best: B | null = null;
  for (const c of candidates) {
    let extra = 0;
    for (const d of catalog.deployments(c))
      extra = Math.max(extra, Buffer.byteLength(JSON.stringify(d.upstreamModel)) - base);
    const b = estimate(c, extra);
    if (!best || b.maxCost > best.maxCost) best = b;
  }
  return best!;
}
