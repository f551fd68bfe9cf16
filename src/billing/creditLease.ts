import { randomUUID } from 'node:crypto';
import type { Db } from '../db/pool';
import { InsufficientFunds, leaseRecalls, placeFlexibleHold, recallLeases, releaseHoldPart } from './ledger';
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
  /**
   * Bills `cost` VND in full and records usage; returns the bill. What the reservation and the lease cannot cover
   * is collected from the account at the flush, or recorded there as a shortfall. Once only.
   */
  settle(cost: number, usage: UsageInput): number;
  /** Charges nothing (a failed upstream call) and records the usage row with cost 0. Once only. */
  cancel(usage?: UsageInput): void;
}

/** Where settled requests and retired, emptied leases go: the flush (./creditFlush.ts). */
export interface LeaseSink {
  /** `cost`: VND covered by the lease; `excess`: VND of the bill beyond it, for the flush to collect or record. */
  charge(usage: UsageInput, accountId: string, holdId: string, cost: number, excess: number): void;
  release(holdId: string): void;
  /** Writes what is queued now (charges first, then releases). */
  flush(): Promise<void>;
}

export interface LeaseOptions {
  leaseVnd: number;
  /** A lease stops taking new reservations after this long, and is replaced. */
  leaseTtlMs: number;
  idleReleaseMs: number;
  /**
   * How long a request the ledger refuses waits, while other leases of the account hold funds, for them to come
   * back (each process reads recalls at its flush) before it is refused.
   */
  waitMs: number;
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
  /** Partial returns so far (their idempotency keys). */
  returns: number;
}

interface Waiter {
  amount: number;
  resolve(r: Reservation): void;
  reject(e: unknown): void;
}
interface AccountState {
  lease: Lease | null;
  waiters: Waiter[];
  pumping: boolean;
  accountId: string;
  apiKeyId: string | null;
  /** Until then the lease takes only what requests need and gives back the rest at each flush (see pump). */
  leanUntil: number;
  /** VND the lease is giving back (releaseHoldPart under way). */
  returning: number;
}

const EXPIRY_GRACE_MS = 60 * 60 * 1000; // far beyond any request's lifetime; only a dead process's lease gets there
/** How long a lease stays lean after a recall or a refusal: a few flushes of every process. */
const LEAN_MS = 5_000;
/** The longest a request waits for funds, in `waitMs`. */
const WAIT_CAP = 6;
/** Pause between two tries of a request waiting for other leases to give funds back. */
const RETRY_MS = 50;

/** What the ledger says is left when it refuses a lease (balance or budget), or null for any other error. */
function leftOf(e: unknown): number | null {
  if (e instanceof InsufficientFunds) return e.available;
  if (e instanceof BudgetExceeded) return e.room;
  return null;
}

/** The refusal a request gets: its own amount and what is left for it. */
function refusal(e: InsufficientFunds | BudgetExceeded, needed: number, left: number): Error {
  return e instanceof InsufficientFunds
    ? new InsufficientFunds(needed, left)
    : new BudgetExceeded(needed, left, e.period);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class Leases {
  private accounts = new Map<string, AccountState>();
  /** The last recall seen per account (its lease_recall_at), so that each recall makes the leases lean once. */
  private recallsSeen = new Map<string, number>();

  constructor(
    private db: Db,
    private sink: LeaseSink,
    private opts: LeaseOptions,
  ) {}

  /**
   * Reserves `maxCost` VND from the account's lease, or with `budgetKeyId` (a key that has a spend budget) from that
   * key's own lease. Throws InsufficientFunds or BudgetExceeded when the ledger refuses. `budgetFenceAt` (the
   * account's, from the caller's key settings): once it has passed, a shared lease placed before it is retired,
   * since the ledger counts such a lease against every budgeted key of the account until it is released.
   */
  async reserve(
    accountId: string,
    maxCost: number,
    budgetKeyId: string | null = null,
    budgetFenceAt: number | null = null,
  ): Promise<Reservation> {
    if (!Number.isSafeInteger(maxCost) || maxCost < 0) throw new Error(`bad reservation amount ${maxCost}`);
    const stateKey = budgetKeyId ?? accountId;
    let st = this.accounts.get(stateKey);
    if (!st) {
      st = { lease: null, waiters: [], pumping: false, accountId, apiKeyId: budgetKeyId, leanUntil: 0, returning: 0 };
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
      if (l && l.inflight === 0 && !st.pumping && (now - l.lastUsed > this.opts.idleReleaseMs || now >= l.rotateAt))
        this.retire(l);
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
   * only when the ledger says the account (or the key's budget) cannot cover it with what this lease has now: funds
   * that came back to the lease while the ledger was asked are tried first, and while other leases of the account
   * (other processes, or this one's retired lease) hold enough, they are recalled and the request waits up to
   * `waitMs` for them. So concurrency never causes a false 402, and a refusal's figures never say the funds were there.
   */
  private async pump(st: AccountState): Promise<void> {
    st.pumping = true;
    let waitStart = 0;
    let waitUntil = 0;
    let lastLeft = 0;
    try {
      while (st.waiters.length) {
        const w = st.waiters[0];
        const r = this.tryTake(st, w.amount);
        if (r) {
          st.waiters.shift();
          w.resolve(r);
          waitStart = 0;
          continue;
        }
        try {
          await this.acquire(st, w.amount);
          continue;
        } catch (e) {
          const ledgerLeft = leftOf(e);
          let err = e;
          if (ledgerLeft !== null) {
            st.leanUntil = Date.now() + LEAN_MS;
            const left = ledgerLeft + this.usable(st);
            const now = Date.now();
            // Waits `waitMs`, renewed while the ledger's figure moves (other leases serve and give back), up to a cap.
            if (!waitStart) [waitStart, waitUntil] = [now, now + this.opts.waitMs];
            else if (ledgerLeft !== lastLeft)
              waitUntil = Math.min(waitStart + WAIT_CAP * this.opts.waitMs, now + this.opts.waitMs);
            lastLeft = ledgerLeft;
            // Funds came back to this lease while the ledger was asked (settled requests): try again at once.
            if (left >= w.amount) continue;
            if (now < waitUntil) {
              const asked = await this.recall(st, w.amount - left, e instanceof BudgetExceeded);
              // Funds this lease is giving back right now reach the ledger in a moment: wait for them too.
              if (asked || st.returning > 0) {
                await sleep(RETRY_MS);
                continue;
              }
            }
            err = refusal(e as InsufficientFunds | BudgetExceeded, w.amount, left);
          }
          st.waiters.shift();
          waitStart = 0;
          w.reject(err);
        }
      }
    } finally {
      st.pumping = false;
    }
  }

  /** What the account's current lease can still give a request. */
  private usable(st: AccountState): number {
    const l = st.lease;
    return l && !l.closing && Date.now() < l.rotateAt ? l.remaining : 0;
  }

  /**
   * Asks the account's other leases (for a `budget` refusal, the key's) to give back at least `missing` VND; false
   * when they do not hold that much.
   */
  private async recall(st: AccountState, missing: number, budget: boolean): Promise<boolean> {
    try {
      const apiKeyId = budget ? st.apiKeyId : null;
      return await recallLeases(this.db, {
        accountId: st.accountId,
        apiKeyId,
        ownHoldId: st.lease?.holdId ?? null,
        missing,
      });
    } catch (e) {
      this.opts.logger?.warn({ err: (e as Error).message, accountId: st.accountId }, 'lease recall failed');
      return false;
    }
  }

  /**
   * Gives back, at a flush, what no request has reserved from the leases of accounts whose leases were recalled
   * (or that are lean after a refusal here), and makes them lean: until LEAN_MS passes they take only what
   * requests need. A return that fails is not put back in memory: the hold keeps it until the lease is released.
   */
  async giveBackRecalled(): Promise<void> {
    const spare = [...this.accounts.values()].filter((st) => st.lease && !st.lease.closing && st.lease.remaining > 0);
    if (spare.length === 0) return;
    const now = Date.now();
    const recalls = await leaseRecalls(this.db, [...new Set(spare.map((st) => st.accountId))], LEAN_MS);
    for (const [accountId, at] of recalls) {
      if (this.recallsSeen.get(accountId) === at) continue;
      this.recallsSeen.set(accountId, at);
      for (const st of spare) if (st.accountId === accountId) st.leanUntil = now + LEAN_MS;
    }
    for (const [id, at] of this.recallsSeen) if (!recalls.has(id) && at < now - LEAN_MS) this.recallsSeen.delete(id);
    for (const st of spare) {
      const lease = st.lease;
      if (st.leanUntil <= now || !lease || lease.closing || lease.remaining <= 0) continue;
      const amount = lease.remaining;
      lease.remaining = 0;
      st.returning += amount;
      try {
        await releaseHoldPart(this.db, {
          holdId: lease.holdId,
          amount,
          idempotencyKey: `lease-return:${lease.holdId}:${++lease.returns}`,
          memo: 'credit lease: unused part returned',
        });
      } catch (e) {
        this.opts.logger?.warn({ err: (e as Error).message, holdId: lease.holdId }, 'credit lease return failed');
      } finally {
        st.returning -= amount;
      }
    }
  }

  /** Extends the current lease, or opens a new one (rotating an aged lease out). */
  private async acquire(st: AccountState, need: number): Promise<void> {
    const { accountId, apiKeyId } = st;
    const now = Date.now();
    const lease = st.lease;
    // Lean: only what the request needs, so that funds other processes wait for are not leased here instead.
    const want = (min: number) => (now < st.leanUntil ? min : Math.max(min, this.opts.leaseVnd));
    if (lease && !lease.closing && now < lease.rotateAt) {
      const min = need - lease.remaining;
      if (min <= 0) return;
      const seq = ++lease.seq;
      const granted = await placeFlexibleHold(this.db, {
        accountId,
        apiKeyId,
        holdId: lease.holdId,
        min,
        want: want(min),
        idempotencyKey: `lease:${lease.holdId}:${seq}`,
        refType: 'lease',
        refId: lease.holdId,
        expiresAt: new Date(lease.rotateAt + EXPIRY_GRACE_MS),
      });
      lease.remaining += granted;
      this.leanIfShort(st, granted, want(min));
      return;
    }
    if (lease) this.retire(lease);
    const holdId = randomUUID();
    const rotateAt = now + this.opts.leaseTtlMs;
    const granted = await placeFlexibleHold(this.db, {
      accountId,
      apiKeyId,
      holdId,
      min: need,
      want: want(need),
      idempotencyKey: `lease:${holdId}:0`,
      refType: 'lease',
      refId: holdId,
      expiresAt: new Date(rotateAt + EXPIRY_GRACE_MS),
    });
    this.leanIfShort(st, granted, want(need));
    st.lease = {
      holdId,
      accountId,
      apiKeyId,
      remaining: granted,
      inflight: 0,
      seq: 0,
      placedAt: now,
      rotateAt,
      lastUsed: now,
      closing: false,
      returns: 0,
    };
  }

  /**
   * A shared lease granted less than it asked for: the account's funds are nearly all leased, so this lease goes
   * lean rather than keep funds another process may need. (A budgeted key's lease is granted a part of its room by
   * design: it goes lean on a recall only.)
   */
  private leanIfShort(st: AccountState, granted: number, wanted: number): void {
    if (granted < wanted && st.apiKeyId === null) st.leanUntil = Date.now() + LEAN_MS;
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
        const bill = Math.max(0, Math.ceil(cost));
        let covered = bill;
        if (bill <= reserved) lease.remaining += reserved - bill;
        else {
          // The usage came out above the reservation: the lease covers what it still has, and the flush collects
          // the rest from the account (or records it as uncollected) in the transaction that writes the charge.
          const extra = Math.min(bill - reserved, lease.remaining);
          lease.remaining -= extra;
          covered = reserved + extra;
        }
        if (covered > 0) this.opts.onCharged?.(usage.operation, usage.model, covered);
        this.sink.charge(usage, lease.accountId, lease.holdId, covered, bill - covered);
        if (lease.closing && lease.inflight === 0) this.sink.release(lease.holdId);
        return bill;
      },
      cancel: (usage) => {
        if (!finish()) return;
        lease.remaining += reserved;
        if (usage) this.sink.charge(usage, lease.accountId, lease.holdId, 0, 0);
        if (lease.closing && lease.inflight === 0) this.sink.release(lease.holdId);
      },
    };
  }
}
