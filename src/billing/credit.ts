import { randomUUID } from 'node:crypto';
import type { Db } from '../db/pool';
import { tx } from '../db/pool';
import { LedgerError, InsufficientFunds, placeFlexibleHold, releaseExpiredHolds, releaseHold } from './ledger';
import { BudgetExceeded } from './budget';
import { writeUsageBatch, type SettledUsage, type UsageInput } from './usageBatch';
import type { Logger } from '../observability/logger';

/**
 * Funds for synchronous requests, without a database round trip on the request path.
 *
 * Each API process leases credit from an account: a ledger hold (ref_type 'lease') of up to `leaseVnd`. A request
 * reserves its maximum cost from the lease in memory (so concurrent requests can never overdraw: the lease itself
 * is backed by a hold), and on completion settles its actual cost; usage records and charges are written every
 * `flushMs` (writeUsageBatch: one `charged` event per lease hold per flush, each request's usage record naming
 * it, the request id its idempotency gate). When a lease cannot
 * cover a request it is extended (one DB transaction); when the account cannot cover it, the request gets 402
 * before any upstream call. Idle or aged leases are released; a crashed process's lease hold carries an
 * expires_at and is released by the sweeper (releaseExpiredHolds), so held funds are never stranded.
 *
 * A key with a spend budget gets leases of its own (the hold names the key): the ledger grants such a lease only
 * within what the key's budget leaves (billing/budget.ts), so in-memory reservations from it can never take the
 * key past its budget either, whatever the number of processes. Other keys share their account's lease.
 */

export type { UsageInput } from './usageBatch';

export interface Reservation {
  readonly accountId: string;
  readonly reserved: number;
  /** Charges `cost` VND (at most the reservation plus what the lease can still cover) and records usage. Once only. */
  settle(cost: number, usage: UsageInput): number;
  /** Charges nothing (a failed upstream call) and records the usage row with cost 0. Once only. */
  cancel(usage?: UsageInput): void;
}

interface Lease {
  holdId: string;
  accountId: string;
  /** Set for the lease of a key with a budget. */
  apiKeyId: string | null;
  remaining: number;
  inflight: number;
  seq: number;
  rotateAt: number;
  lastUsed: number;
  closing: boolean;
}

interface Waiter { amount: number; resolve(r: Reservation): void; reject(e: unknown): void }
interface AccountState { lease: Lease | null; waiters: Waiter[]; pumping: boolean; accountId: string; apiKeyId: string | null }

export interface CreditOptions {
  leaseVnd?: number;
  flushMs?: number;
  /** A lease stops taking new reservations after this long, and is replaced. */
  leaseTtlMs?: number;
  idleReleaseMs?: number;
  logger?: Logger;
  onCharged?: (operation: string, model: string, vnd: number) => void;
}

const EXPIRY_GRACE_MS = 60 * 60 * 1000; // far beyond any request's lifetime; only a dead process's lease gets there

/** A settled request waiting for the next flush: one small fixed-shape object, no copy of its usage input. */
class Settled implements SettledUsage {
  refused?: boolean;
  constructor(readonly usage: UsageInput, readonly accountId: string, readonly holdId: string, readonly cost: number) {}
}

export class CreditManager {
  private accounts = new Map<string, AccountState>();
  private pendingUsage: Settled[] = [];
  private pendingReleases: Lease[] = [];
  private timer: NodeJS.Timeout;
  private sweepTimer: NodeJS.Timeout;
  private flushing: Promise<void> | null = null;
  private readonly leaseVnd: number;
  private readonly leaseTtlMs: number;
  private readonly idleReleaseMs: number;

  constructor(private db: Db, private opts: CreditOptions = {}) {
    this.leaseVnd = opts.leaseVnd ?? 20000;
    this.leaseTtlMs = opts.leaseTtlMs ?? 5 * 60 * 1000;
    this.idleReleaseMs = opts.idleReleaseMs ?? 10_000;
    this.timer = setInterval(() => void this.flush().catch(() => undefined), opts.flushMs ?? 200);
    this.timer.unref();
    this.sweepTimer = setInterval(() => void releaseExpiredHolds(this.db, 0).catch(() => undefined), 60_000);
    this.sweepTimer.unref();
  }

  /**
   * Reserves `maxCost` VND from the account's lease, or with `budgetKeyId` (a key that has a spend budget) from that
   * key's own lease. Throws InsufficientFunds or BudgetExceeded when the ledger refuses.
   */
  async reserve(accountId: string, maxCost: number, budgetKeyId: string | null = null): Promise<Reservation> {
    if (!Number.isSafeInteger(maxCost) || maxCost < 0) throw new Error(`bad reservation amount ${maxCost}`);
    const stateKey = budgetKeyId ?? accountId;
    let st = this.accounts.get(stateKey);
    if (!st) {
      st = { lease: null, waiters: [], pumping: false, accountId, apiKeyId: budgetKeyId };
      this.accounts.set(stateKey, st);
    }
    // Fast path: no one queued ahead and the lease covers it (no I/O, no await).
    if (st.waiters.length === 0) {
      const r = this.tryTake(st, maxCost);
      if (r) return r;
    }
    return new Promise<Reservation>((resolve, reject) => {
      st!.waiters.push({ amount: maxCost, resolve, reject });
      if (!st!.pumping) void this.pump(st!);
    });
  }

  /**
   * This process's open lease of an account: its unspent VND and the reservations still open against it. Once every
   * request is over and its charges flushed, the account's held_vnd equals `remaining` (operators, tests).
   */
  leaseOf(accountId: string): { remaining: number; inflight: number } | null {
    const l = this.accounts.get(accountId)?.lease;
    return l ? { remaining: l.remaining, inflight: l.inflight } : null;
  }

  private tryTake(st: AccountState, amount: number): Reservation | null {
    const lease = st.lease;
    const now = Date.now();
    if (!lease || lease.closing || now >= lease.rotateAt || lease.remaining < amount) return null;
    lease.remaining -= amount;
    lease.inflight++;
    lease.lastUsed = now;
    return this.reservation(lease, amount);
  }

  /**
   * Serves queued reservations in arrival order, one lease acquisition at a time per account. A request is refused
   * only when the ledger itself says the account cannot cover it, so concurrency never causes a false 402.
   */
  private async pump(st: AccountState): Promise<void> {
    st.pumping = true;
    try {
      while (st.waiters.length) {
        const w = st.waiters[0];
        const r = this.tryTake(st, w.amount);
        if (r) {
          st.waiters.shift();
          w.resolve(r);
          continue;
        }
        try {
          await this.acquire(st, w.amount);
        } catch (e) {
          st.waiters.shift();
          w.reject(e);
        }
      }
    } finally {
      st.pumping = false;
    }
  }

  /** Extends the current lease, or opens a new one (rotating an aged lease out). */
  private async acquire(st: AccountState, need: number): Promise<void> {
    const { accountId, apiKeyId } = st;
    const now = Date.now();
    const lease = st.lease;
    if (lease && !lease.closing && now < lease.rotateAt) {
      const min = need - lease.remaining;
      if (min <= 0) return;
      const seq = ++lease.seq;
      try {
        const granted = await placeFlexibleHold(this.db, {
          accountId, apiKeyId, holdId: lease.holdId, min, want: Math.max(min, this.leaseVnd), idempotencyKey: `lease:${lease.holdId}:${seq}`,
          refType: 'lease', refId: lease.holdId, expiresAt: new Date(lease.rotateAt + EXPIRY_GRACE_MS),
        });
        lease.remaining += granted;
      } catch (e) {
        if (e instanceof InsufficientFunds) throw new InsufficientFunds(need, e.available + lease.remaining);
        if (e instanceof BudgetExceeded) throw new BudgetExceeded(need, e.room + lease.remaining, e.period);
        throw e;
      }
      return;
    }
    if (lease) this.retire(lease);
    const holdId = randomUUID();
    const rotateAt = now + this.leaseTtlMs;
    const granted = await placeFlexibleHold(this.db, {
      accountId, apiKeyId, holdId, min: need, want: Math.max(need, this.leaseVnd), idempotencyKey: `lease:${holdId}:0`,
      refType: 'lease', refId: holdId, expiresAt: new Date(rotateAt + EXPIRY_GRACE_MS),
    });
    st.lease = { holdId, accountId, apiKeyId, remaining: granted, inflight: 0, seq: 0, rotateAt, lastUsed: now, closing: false };
  }

  private retire(lease: Lease): void {
    if (lease.closing) return;
    lease.closing = true;
    const st = this.accounts.get(lease.apiKeyId ?? lease.accountId);
    if (st?.lease === lease) st.lease = null;
    if (lease.inflight === 0) this.pendingReleases.push(lease);
  }

  private reservation(lease: Lease, reserved: number): Reservation {
    let done = false;
    const finish = () => {
      if (done) return false;
      done = true;
      lease.inflight--;
      lease.lastUsed = Date.now();
      return true;
    };
    return {
      accountId: lease.accountId,
      reserved,
      settle: (cost, usage) => {
        if (!finish()) return 0;
        let charge = Math.max(0, Math.ceil(cost));
        if (charge <= reserved) {
          lease.remaining += reserved - charge;
        } else {
          // The estimate was short (it should not be: estimates are upper bounds); take what the lease still has.
          const extra = Math.min(charge - reserved, lease.remaining);
          lease.remaining -= extra;
          if (reserved + extra < charge) this.opts.logger?.warn({ requestId: usage.id, cost: charge, collected: reserved + extra }, 'cost exceeded reservation');
          charge = reserved + extra;
        }
        if (charge > 0) this.opts.onCharged?.(usage.operation, usage.model, charge);
        this.pendingUsage.push(new Settled(usage, lease.accountId, lease.holdId, charge));
        if (lease.closing && lease.inflight === 0) this.pendingReleases.push(lease);
        return charge;
      },
      cancel: (usage) => {
        if (!finish()) return;
        lease.remaining += reserved;
        if (usage) this.pendingUsage.push(new Settled(usage, lease.accountId, lease.holdId, 0));
        if (lease.closing && lease.inflight === 0) this.pendingReleases.push(lease);
      },
    };
  }

  /** Writes queued charges and usage records in one transaction, then releases retired leases. */
  flush(): Promise<void> {
    if (this.flushing) return this.flushing.then(() => this.flush());
    this.flushing = this.doFlush().finally(() => { this.flushing = null; });
    return this.flushing;
  }

  private async doFlush(): Promise<void> {
    const now = Date.now();
    for (const st of this.accounts.values()) {
      const l = st.lease;
      if (l && l.inflight === 0 && !st.pumping && (now - l.lastUsed > this.idleReleaseMs || now >= l.rotateAt)) this.retire(l);
    }
    // Snapshot releases with the charges: a lease is released only after every charge against it is written.
    const releases = this.pendingReleases;
    this.pendingReleases = [];
    const usage = this.pendingUsage;
    if (usage.length) {
      this.pendingUsage = [];
      try {
        await this.writeBatch(usage);
      } catch (e) {
        if (!(e instanceof LedgerError)) {
          // Keep them for the next flush: the usage insert gates every charge, so the retry cannot charge twice.
          this.pendingUsage = usage.concat(this.pendingUsage);
          this.pendingReleases = releases.concat(this.pendingReleases);
          this.opts.logger?.error({ err: (e as Error).message, requests: usage.length }, 'credit flush failed; will retry');
          return;
        }
        // A charge the ledger refuses (should never happen) must not block the others: write each request on its
        // own, and one still refused is logged and recorded without a charge.
        const left = await this.writeOneByOne(usage);
        if (left.length) {
          this.pendingUsage = left.concat(this.pendingUsage);
          this.pendingReleases = releases.concat(this.pendingReleases);
          return;
        }
      }
    }
    for (const l of releases) {
      try {
        await releaseHold(this.db, { holdId: l.holdId, idempotencyKey: `lease-release:${l.holdId}`, memo: 'credit lease returned' });
      } catch (e) {
        this.pendingReleases.push(l);
      }
    }
  }

  /**
   * One transaction for the batch, its usage records written with COPY; a request already written (a flush retried
   * after a commit it did not see acknowledged) makes COPY fail with unique_violation, and the batch is written again
   * through the per-row gate, which skips it (and charges only the rows it inserts).
   */
  private async writeBatch(batch: Settled[]): Promise<void> {
    try {
      await tx(this.db, (c) => writeUsageBatch(c, batch, { copy: true }));
    } catch (e) {
      if ((e as { code?: unknown })?.code !== '23505') throw e;
      await tx(this.db, (c) => writeUsageBatch(c, batch));
    }
  }

  /** Writes settled requests one transaction each; returns those not written (database trouble: retried later). */
  private async writeOneByOne(batch: Settled[]): Promise<Settled[]> {
    for (let i = 0; i < batch.length; i++) {
      try {
        await this.writeAlone(batch[i]);
      } catch (e) {
        this.opts.logger?.error({ err: (e as Error).message }, 'credit flush failed; will retry');
        return batch.slice(i);
      }
    }
    return [];
  }

  /** One settled request in its own transaction; a charge the ledger refuses is logged and left out. */
  private async writeAlone(s: Settled): Promise<void> {
    try {
      await tx(this.db, (c) => writeUsageBatch(c, [s]));
    } catch (e) {
      if (!(e instanceof LedgerError) || s.refused) throw e;
      this.opts.logger?.error({ err: e.message, requestId: s.usage.id, holdId: s.holdId, cost: s.cost }, 'charge refused by ledger');
      s.refused = true; // recorded as a usage record without a charge
      await tx(this.db, (c) => writeUsageBatch(c, [s]));
    }
  }

  /** Flushes everything and returns every lease (graceful shutdown). */
  async close(): Promise<void> {
    clearInterval(this.timer);
    clearInterval(this.sweepTimer);
    for (const st of this.accounts.values()) if (st.lease) this.retire(st.lease);
    await this.flush();
  }
}
