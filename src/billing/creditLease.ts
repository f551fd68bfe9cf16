import { randomUUID } from 'node:crypto';
import type { Db } from '../db/pool';
import { InsufficientFunds, placeFlexibleHold } from './ledger';
import { BudgetExceeded } from './budget';
import type { UsageInput } from './usageBatch';
import type { Logger } from '../observability/logger';

/**
 * The lease side of credit (./credit.ts): reserve, settle, release, all in memory against a lease that a ledger
 * hold backs. A lease is extended or opened in one DB transaction when it cannot cover a request; it is retired
 * when it ages (rotateAt), idles, or the process closes, and handed to the flush (`LeaseSink.release`) once no
 * reservation is open against it. Settled requests go to the flush too (`LeaseSink.charge`).
 */

export interface Reservation {
  readonly accountId: string;
  readonly reserved: number;
  /** Charges `cost` VND (at most the reservation plus what the lease can still cover) and records usage. Once only. */
  settle(cost: number, usage: UsageInput): number;
  /** Charges nothing (a failed upstream call) and records the usage row with cost 0. Once only. */
  cancel(usage?: UsageInput): void;
}

/** Where settled requests and retired, emptied leases go: the flush (./creditFlush.ts). */
export interface LeaseSink {
  charge(usage: UsageInput, accountId: string, holdId: string, cost: number): void;
  release(holdId: string): void;
  /** Writes what is queued now (charges first, then releases). */
  flush(): Promise<void>;
}

export interface LeaseOptions {
  leaseVnd: number;
  /** A lease stops taking new reservations after this long, and is replaced. */
  leaseTtlMs: number;
  idleReleaseMs: number;
  logger?: Logger;
  onCharged?: (operation: string, model: string, vnd: number) => void;
}

interface Lease {
  holdId: string;
  accountId: string;
  /** Set for the lease of a key with a budget. */
  apiKeyId: string | null;
  remaining: number;
  inflight: number;
  seq: number;
  /** Date.now() before the hold was placed (for the budget fence: see reserve). */
  placedAt: number;
  rotateAt: number;
  lastUsed: number;
  closing: boolean;
}

interface Waiter { amount: number; resolve(r: Reservation): void; reject(e: unknown): void }
interface AccountState { lease: Lease | null; waiters: Waiter[]; pumping: boolean; accountId: string; apiKeyId: string | null }

const EXPIRY_GRACE_MS = 60 * 60 * 1000; // far beyond any request's lifetime; only a dead process's lease gets there

export class Leases {
  private accounts = new Map<string, AccountState>();

  constructor(private db: Db, private sink: LeaseSink, private opts: LeaseOptions) {}

  /**
   * Reserves `maxCost` VND from the account's lease, or with `budgetKeyId` (a key that has a spend budget) from that
   * key's own lease. Throws InsufficientFunds or BudgetExceeded when the ledger refuses. `budgetFenceAt` (the
   * account's, from the caller's key settings): once it has passed, a shared lease placed before it is retired,
   * since the ledger counts such a lease against every budgeted key of the account until it is released.
   */
  async reserve(accountId: string, maxCost: number, budgetKeyId: string | null = null, budgetFenceAt: number | null = null): Promise<Reservation> {
    if (!Number.isSafeInteger(maxCost) || maxCost < 0) throw new Error(`bad reservation amount ${maxCost}`);
    const stateKey = budgetKeyId ?? accountId;
    let st = this.accounts.get(stateKey);
    if (!st) {
      st = { lease: null, waiters: [], pumping: false, accountId, apiKeyId: budgetKeyId };
      this.accounts.set(stateKey, st);
    }
    if (budgetFenceAt !== null) {
      const flushed = this.passFence(accountId, budgetFenceAt, budgetKeyId !== null);
      if (flushed) await flushed;
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
   * Retires the account's shared lease placed before its budget fence, once the fence has passed: the ledger counts
   * such a lease against every budgeted key of the account until it is released. For a budgeted key's request, the
   * flush runs first when nothing is open against it, so that its release reaches the ledger before the key's room
   * is read (once per fence and process).
   */
  private passFence(accountId: string, fenceAt: number, budgeted: boolean): Promise<void> | null {
    const lease = this.accounts.get(accountId)?.lease;
    if (!lease || lease.placedAt >= fenceAt || Date.now() < fenceAt) return null;
    this.retire(lease);
    return budgeted && lease.inflight === 0 ? this.sink.flush() : null;
  }

  /** An account's open lease: its unspent VND and the reservations still open against it. */
  leaseOf(accountId: string): { remaining: number; inflight: number } | null {
    const l = this.accounts.get(accountId)?.lease;
    return l ? { remaining: l.remaining, inflight: l.inflight } : null;
  }

  /** Retires the leases that have idled or aged with nothing open against them (called before each flush). */
  retireIdle(now: number): void {
    for (const st of this.accounts.values()) {
      const l = st.lease;
      if (l && l.inflight === 0 && !st.pumping && (now - l.lastUsed > this.opts.idleReleaseMs || now >= l.rotateAt)) this.retire(l);
    }
  }

  /** Retires every lease (graceful shutdown). */
  retireAll(): void {
    for (const st of this.accounts.values()) if (st.lease) this.retire(st.lease);
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
          accountId, apiKeyId, holdId: lease.holdId, min, want: Math.max(min, this.opts.leaseVnd), idempotencyKey: `lease:${lease.holdId}:${seq}`,
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
    const rotateAt = now + this.opts.leaseTtlMs;
    const granted = await placeFlexibleHold(this.db, {
      accountId, apiKeyId, holdId, min: need, want: Math.max(need, this.opts.leaseVnd), idempotencyKey: `lease:${holdId}:0`,
      refType: 'lease', refId: holdId, expiresAt: new Date(rotateAt + EXPIRY_GRACE_MS),
    });
    st.lease = { holdId, accountId, apiKeyId, remaining: granted, inflight: 0, seq: 0, placedAt: now, rotateAt, lastUsed: now, closing: false };
  }

  private retire(lease: Lease): void {
    if (lease.closing) return;
    lease.closing = true;
    const st = this.accounts.get(lease.apiKeyId ?? lease.accountId);
    if (st?.lease === lease) st.lease = null;
    if (lease.inflight === 0) this.sink.release(lease.holdId);
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
        this.sink.charge(usage, lease.accountId, lease.holdId, charge);
        if (lease.closing && lease.inflight === 0) this.sink.release(lease.holdId);
        return charge;
      },
      cancel: (usage) => {
        if (!finish()) return;
        lease.remaining += reserved;
        if (usage) this.sink.charge(usage, lease.accountId, lease.holdId, 0);
        if (lease.closing && lease.inflight === 0) this.sink.release(lease.holdId);
      },
    };
  }
}
