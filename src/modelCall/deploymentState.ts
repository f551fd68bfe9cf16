import type { Deployment } from '../catalog';
import { coolsDown, FAILURE_CLASSES, type FailureClass } from '../providers';
import type { RoutingSettings } from './settings';

/**
 * One deployment's health and counters, kept in memory per process (each API process and worker learns on its
 * own: no shared state to consult on the request path).
 *
 * Cooldown: a failure that is the provider's trouble (connect error, timeout, 429, 5xx, a stream it cut) keeps the
 * deployment out of selection until `until`: the upstream's Retry-After when it sent one, else
 * base x 2^(failures in a row - 1); both bounded by cooldownMaxMs. When the cooldown is over the deployment is
 * half-open: one request probes it (others keep away while that probe is out); a success closes it (the failure
 * count resets), a failure opens it again for twice as long.
 *
 * A verdict counts once per cooldown period. Each try notes the cooldown epoch (`cooldowns`) it started in: one
 * that started before the current cooldown began (it was in flight when another try's failure opened it) neither
 * extends nor escalates it when it fails, nor closes it when it succeeds, so ten concurrent 500s cool a deployment
 * once for the base time, not ten steps up the backoff. A failure while the deployment is cooling (a last-resort
 * try, a stream cut) does not escalate either; only its own Retry-After may lengthen the cooldown.
 */
export class DeploymentState {
  until = 0;
  failuresInRow = 0;
  probing = false;
  /** Smooth weighted round-robin position (pickHealthy). */
  current = 0;
  /** Counters for /metrics (read when scraped). */
  requests = 0;
  retries = 0;
  fallbacks = 0;
  cooldowns = 0;
  readonly failures: Record<FailureClass, number> = Object.fromEntries(FAILURE_CLASSES.map((c) => [c, 0])) as Record<
    FailureClass,
    number
  >;

  constructor(readonly deployment: Deployment) {}

  /** Selectable now: not cooling down, and not half-open with a probe already out. */
  available(now: number): boolean {
    return this.until <= now && !this.probing;
  }

  coolingDown(now: number): boolean {
    return this.until > now;
  }

  /** Starts a try; true if it is the half-open probe (the caller ends it with succeeded/failed/abandoned). */
  begin(now: number): boolean {
    if (this.failuresInRow === 0 || this.until > now || this.probing) return false;
    this.probing = true;
    return true;
  }

  /** A try that started in cooldown epoch `epoch` succeeded: it closes the deployment unless a cooldown began since. */
  succeeded(epoch: number, probe: boolean): void {
    if (probe) this.probing = false;
    if (epoch === this.cooldowns) this.failuresInRow = 0;
  }

  /** The try ended without a verdict on the deployment (client gone, our own error). */
  abandoned(probe: boolean): void {
    if (probe) this.probing = false;
  }

  /**
   * A try failed (`epoch`: the cooldown epoch it started in; a stream cut, reported later, counts as current).
   * Opens a new cooldown, one step further up the backoff, only if it is news: the try started in the current
   * epoch and the deployment is not cooling already.
   */
  failed(
    cls: FailureClass,
    retryAfterMs: number | null,
    now: number,
    s: RoutingSettings,
    epoch = this.cooldowns,
    probe = false,
  ): void {
    this.failures[cls]++;
    if (probe) this.probing = false;
    if (!coolsDown(cls) || epoch !== this.cooldowns) return;
    if (this.until > now) {
      if (retryAfterMs !== null) this.until = Math.max(this.until, now + Math.min(s.cooldownMaxMs, retryAfterMs));
      return;
    }
    this.failuresInRow++;
    const backoff = s.cooldownBaseMs * 2 ** Math.min(this.failuresInRow - 1, 30);
    this.until = now + Math.min(s.cooldownMaxMs, retryAfterMs ?? backoff);
    this.cooldowns++;
  }
}

/**
 * Weighted choice among the available deployments not tried yet by this request: smooth weighted round-robin (as
 * nginx's upstream balancing). Chosen over weighted random because it honours the operator's weights exactly over
 * any window (keys with different quotas get their share, not a share on average), it is deterministic (a test can
 * say which deployment a request reaches), and it needs no per-request bookkeeping or shared state; over
 * least-outstanding-requests because that ignores weights. Each process balances on its own.
 */
export function pickHealthy(
  states: DeploymentState[],
  tried: Set<DeploymentState> | null,
  now: number,
): DeploymentState | null {
  if (states.length === 1) {
    const s = states[0];
    return s.available(now) && !tried?.has(s) ? s : null;
  }
  let total = 0;
  let best: DeploymentState | null = null;
  for (const s of states) {
    if (!s.available(now) || tried?.has(s)) continue;
    s.current += s.deployment.weight;
    total += s.deployment.weight;
    if (!best || s.current > best.current) best = s;
  }
  if (best) best.current -= total;
  return best;
}
