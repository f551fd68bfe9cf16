import { offPath } from '../observability';
import type { Db } from '../db';
import { releaseExpiredHolds } from '../billing';
import { Leases, type Reservation } from './creditLease';
import { CreditFlush } from './creditFlush';
import { CreditHolder, recoverDeadLeases, staleAfter } from './creditHolders';
import type { Logger } from '../observability';

/**
 * Funds for synchronous requests, without a database round trip on the request path.
 *
 * Each API process leases credit from an account: a ledger hold (ref_type 'lease') of up to `leaseVnd`. A request
 * reserves its maximum cost from the lease in memory (so concurrent requests can never overdraw: the lease itself
 * is backed by a hold), and on completion settles its actual cost; usage records and charges are written every
 * `flushMs` (writeUsageBatch: one `charged` event per lease hold per flush, each request's usage record naming
 * it, the request id its idempotency gate). When a lease cannot
 * cover a request it is extended (one DB transaction); when the account cannot cover it, the request gets 402
 * before any upstream call. Idle or aged leases are released, and a lease retired while requests are open on it
 * gives back at once what they did not reserve. A process that stops cleanly returns its leases (close); one that
 * dies stops heartbeating, and any other process recovers its leases within a few `livenessMs`
 * (./creditHolders.ts). The hold's expires_at stays as the last backstop, so held funds are never stranded.
 *
 * A key with a spend budget gets leases of its own (the hold names the key): the ledger grants such a lease only
 * within what the key's budget leaves (billing/budget.ts), so in-memory reservations from it can never take the
 * key past its budget either, whatever the number of processes. Other keys share their account's lease.
 *
 * Two rooms: the lease (./creditLease.ts: reserve, settle, release in memory) and the flush (./creditFlush.ts:
 * usage and charges batched into the ledger). This class wires them together and runs their timers.
 */

export type { UsageInput } from '../billing';
export type { Reservation } from './creditLease';

export interface CreditOptions {
  leaseVnd?: number;
  flushMs?: number;
  /** A lease stops taking new reservations after this long, and is replaced. */
  leaseTtlMs?: number;
  idleReleaseMs?: number;
  /** How long a request the ledger refuses may wait for other leases of the account to give funds back. */
  waitMs?: number;
  /**
   * Heartbeat period of this process as a lease holder, and of its recovery of dead holders' leases: a holder
   * silent for three periods is declared dead (./creditHolders.ts).
   */
  livenessMs?: number;
  logger?: Logger;
  onCharged?: (operation: string, model: string, vnd: number) => void;
  /** VND of a request's bill its account could not cover, once its shortfall is committed. */
  onUncollected?: (operation: string, model: string, vnd: number) => void;
}

export class CreditManager {
  private readonly leases: Leases;
  private readonly flusher: CreditFlush;
  private readonly holder: CreditHolder;
  private timer: NodeJS.Timeout;
  private sweepTimer: NodeJS.Timeout;
  private livenessTimer: NodeJS.Timeout;

  constructor(
    private db: Db,
    opts: CreditOptions = {},
  ) {
    this.flusher = new CreditFlush(
      db,
      {
        beforeFlush: (now) => this.leases.retireIdle(now),
        afterCharges: () => this.leases.giveBackRecalled(),
        // Committed: what was collected beyond the leases is charged, the rest is counted as uncollected.
        billed: (operation, model, collected, uncollected) => {
          if (collected > 0) opts.onCharged?.(operation, model, collected);
          if (uncollected > 0) opts.onUncollected?.(operation, model, uncollected);
        },
      },
      opts.logger,
    );
    const flushMs = opts.flushMs ?? 200;
    this.holder = new CreditHolder(db, () => this.leases.forgetAll(), opts.logger);
    this.leases = new Leases(db, this.flusher, {
      holderId: () => this.holder.current(),
      leaseVnd: opts.leaseVnd ?? 20000,
      leaseTtlMs: opts.leaseTtlMs ?? 5 * 60 * 1000,
      idleReleaseMs: opts.idleReleaseMs ?? 10_000,
      // Long enough for every process to flush a few times (each gives back recalled funds at its flush).
      waitMs: opts.waitMs ?? Math.min(5000, Math.max(2000, 10 * flushMs)),
      logger: opts.logger,
      onCharged: opts.onCharged,
    });
    this.timer = setInterval(() => void this.flush().catch(() => undefined), flushMs);
    this.timer.unref();
    this.sweepTimer = setInterval(() => void releaseExpiredHolds(this.db, 0).catch(() => undefined), 60_000);
    this.sweepTimer.unref();
    const livenessMs = opts.livenessMs ?? 10_000;
    let beating = false; // one heartbeat at a time, however slow the database
    this.livenessTimer = setInterval(() => {
      if (beating) return;
      beating = true;
      void offPath('credit heartbeat', () =>
        this.holder.beat().then(() => recoverDeadLeases(this.db, staleAfter(livenessMs))),
      )
        .catch((e: Error) => opts.logger?.warn({ err: e.message }, 'credit holder heartbeat or recovery failed'))
        .finally(() => (beating = false));
    }, livenessMs);
    this.livenessTimer.unref();
  }

  /**
   * Reserves `maxCost` VND from the account's lease, or with `budgetKeyId` (a key that has a spend budget) from that
   * key's own lease. Throws InsufficientFunds or BudgetExceeded when the ledger refuses. `budgetFenceAt`: the
   * account's budget fence from the caller's key settings (Leases.reserve).
   */
  reserve(
    accountId: string,
    maxCost: number,
    budgetKeyId: string | null = null,
    budgetFenceAt: number | null = null,
  ): Promise<Reservation> {
    return this.leases.reserve(accountId, maxCost, budgetKeyId, budgetFenceAt);
  }

  /**
   * This process's open lease of an account: its unspent VND and the reservations still open against it. Once every
   * request is over and its charges flushed, the account's held_vnd equals `remaining` (operators, tests).
   */
  leaseOf(accountId: string): { remaining: number; inflight: number } | null {
    return this.leases.leaseOf(accountId);
  }

  /** Writes queued charges and usage records in one transaction, then releases retired leases. */
  flush(): Promise<void> {
    return this.flusher.flush();
  }

  /**
   * Flushes everything and returns every lease (graceful shutdown, once no request is open), then unregisters this
   * process as a holder, so that a lease still open (a request that outlived the shutdown) is recovered at once.
   */
  async close(): Promise<void> {
    clearInterval(this.timer);
    clearInterval(this.sweepTimer);
    clearInterval(this.livenessTimer);
    this.leases.retireAll();
    await this.leases.settled();
    await this.flush();
    await this.holder.close();
  }
}
