import type { WorkSpan } from '../../src/observability/offPathWork';
import type { SeqPair } from './load';

/**
 * Where the c=1 tail comes from (issue 40 point 3): the slowest 1 % of a target's sequential requests (those that
 * make its p99) set beside what ran while each was in flight: the target's garbage collections and the off-path
 * work it publishes (credit flush, log flush, heartbeat: src/observability/offPathWork.ts), the collections of
 * the load generator and of the upstream, the scheduler's windows (bench/lib/schedSpans.ts), and whether the
 * direct request paired with it was slow too (the upstream or the machine, not the target). Each cause is given
 * for the tail and for all requests: a cause the tail meets far more often than the average request is where the
 * tail comes from; one it meets as often is a bystander.
 */
export interface TailCause {
  cause: string;
  /** Tail requests that overlapped it. */
  tail: number;
  /** All requests that overlapped it. */
  all: number;
  /** How many times it ran over the requests, and for how long on average (ms). */
  spans: number;
  meanMs: number;
}

export interface TailCauses {
  requests: number;
  tail: number;
  /** The slowest tail request's time and the fastest's (the tail starts there). */
  tailFromUs: number;
  causes: TailCause[];
  /** Tail requests that overlapped none of the causes. */
  unexplained: number;
}

/** The direct request of a pair counts as slow at or above this percentile of the direct requests. */
const DIRECT_SLOW_PCT = 98;
const UPSTREAM_SLOW = 'direct neighbour slow too (upstream or machine)';

export function attributeTail(pairs: SeqPair[], spans: WorkSpan[], rigGcs: WorkSpan[]): TailCauses | null {
  if (pairs.length < 100) return null;
  const bySpeed = [...pairs].sort((a, b) => b.us - a.us);
  const tailN = Math.ceil(pairs.length / 100);
  const tail = new Set(bySpeed.slice(0, tailN));
  const directs = pairs.map((p) => p.directUs).sort((a, b) => a - b);
  const directSlow = directs[Math.ceil((DIRECT_SLOW_PCT / 100) * directs.length) - 1];
  const all = [...spans, ...rigGcs];
  const names = [...new Set(all.map((s) => s.name))].sort();
  const counts = new Map<string, TailCause>(
    [...names, UPSTREAM_SLOW].map((n) => [n, { cause: n, tail: 0, all: 0, spans: 0, meanMs: 0 }]),
  );
  const from = pairs[0].startMs;
  const to = Math.max(...pairs.map((p) => p.startMs + p.us / 1000));
  for (const sp of all) {
    if (sp.endMs < from || sp.startMs > to) continue;
    const c = counts.get(sp.name)!;
    c.meanMs = (c.meanMs * c.spans + (sp.endMs - sp.startMs)) / (c.spans + 1);
    c.spans++;
  }
  // Spans by start, so each request looks only at those that began before it ended.
  const sorted = [...all].sort((a, b) => a.startMs - b.startMs);
  let unexplained = 0;
  for (const p of pairs) {
    const endMs = p.startMs + p.us / 1000;
    const met = new Set<string>();
    for (const s of sorted) {
      if (s.startMs >= endMs) break;
      if (s.endMs > p.startMs) met.add(s.name);
    }
    if (p.directUs >= directSlow) met.add(UPSTREAM_SLOW);
    const inTail = tail.has(p);
    for (const name of met) {
      const c = counts.get(name)!;
      c.all++;
      if (inTail) c.tail++;
    }
    if (inTail && met.size === 0) unexplained++;
  }
  return {
    requests: pairs.length,
    tail: tailN,
    tailFromUs: bySpeed[tailN - 1].us,
    causes: [...counts.values()].sort((a, b) => b.tail - a.tail || b.all - a.all),
    unexplained,
  };
}
