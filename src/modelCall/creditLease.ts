import { randomUUID } from 'node:crypto';
import type { Db } from '../db';
import {
  InsufficientFunds,
  leaseRecalls,
  placeFlexibleHold,
  recallLeases,
  releaseHoldPart,
  BudgetExceeded,
} from '../billing';
import type { UsageInput } from '../billing';
import type { Logger } from '../observability';

/**
 * The lease side of credit (./credit.ts): reserve, settle, release, all in memory against a lease that a ledger
 * hold backs. A lease is extended or opened in one DB transaction when it cannot cover a request; it is retired
 * when it ages (rotateAt), idles, meets the budget fence, or the process closes, and handed to the flush
 * (`LeaseSink.release`) once no reservation is open against it. A lease retired with reservations still open (a
 * long stream) gives back what none of them reserved at once, and what their settlements leave at each flush, so
 * that its funds serve the account's next requests while the stream runs. Settled requests go to the flush too
 * (`LeaseSink.charge`). Every lease hold names this process's holder (./creditHolders.ts), so that the leases of a
 * process that dies are recovered within a minute.
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
  /** The id of this process as a lease holder (registered), placed on every lease hold. */
  holderId?: () => Promise<string>;
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
  /** The lease's last give-back, which its release waits for (a hold is closed only after its returns). */
  givingBack: Promise<void> | null;
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

/** How long a refused request waits for funds: since `start`, until `until`; `lastLeft` the ledger's last figure. */
export interface WaitWindow {
  start: number;
  until: number;
  lastLeft: number;
}

/**
 * The wait of a request the ledger refused (`ledgerLeft` left) at `now`: `waitMs` from its first refusal, renewed
 * while the ledger's figure moves (other leases serve and give back), never past WAIT_CAP x `waitMs` in all.
 */
export function waitWindow(w: WaitWindow | null, now: number, ledgerLeft: number, waitMs: number): WaitWindow {
  if (!w) return { start: now, until: now + waitMs, lastLeft: ledgerLeft };
  const until = ledgerLeft !== w.lastLeft ? Math.min(w.start + WAIT_CAP * waitMs, now + waitMs) : w.until;
  return { start: w.start, until, lastLeft: ledgerLeft };
}

/**
 * A reservation of `reserved` VND settled at `cost`, on a lease with `remaining` VND unreserved: the bill (whole
 * VND), the part the lease covers and what the lease keeps. A bill above the reservation takes what the lease still
 * has; the rest (bill - covered) is for the flush to collect from the account or record as uncollected.
 */
export function settlement(
  cost: number,
  reserved: number,
  remaining: number,
): { bill: number; covered: number; remaining: number } {
  const bill = Math.max(0, Math.ceil(cost));
  if (bill <= reserved) return { bill, covered: bill, remaining: remaining + reserved - bill };
  const extra = Math.min(bill - reserved, remaining);
  return { bill, covered: reserved + extra, remaining: remaining - extra };
}

/** What the ledger says is left when it refuses a lease (balance or budget), or null for any other error. */
export function leftOf(e: unknown): number | null {
  if (e instanceof InsufficientFunds) return e.available;
  if (e instanceof BudgetExceeded) return e.room;
  return null;
}

/** The refusal a request gets: its own amount and what is left for it. */
export function refusal(e: InsufficientFunds | BudgetExceeded, needed: number, left: number): Error {
  return e instanceof InsufficientFunds
    ? new InsufficientFunds(needed, left)
    : new BudgetExceeded(needed, left, e.period);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class Leases {
  private accounts = new Map<string, AccountState>();
  /** The last recall seen per account (its lease_recall_at), so that each recall makes the leases lean once. */
  private recallsSeen = new Map<string, number>();
  /** Retired leases with reservations still open: what their settlements leave is given back at each flush. */
  private draining = new Set<Lease>();
  /** Give-backs under way (awaited by `settled`, so that a closing process flushes after them). */
  private pending = new Set<Promise<void>>();

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
    const givingBack = this.retire(lease);
    if (givingBack) return givingBack;
    return budgeted ? this.sink.flush() : null;
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

  /** Resolves once the give-backs under way are done (or failed), so that a flush after it releases every lease. */
  async settled(): Promise<void> {
    while (this.pending.size) await Promise.all(this.pending);
  }

  /**
   * Forgets every lease without releasing it: another process recovered them (this one missed its heartbeats).
   * Requests still open against them are charged at the flush as usual, which the ledger refuses on the closed hold
   * (the request is recorded, its bill a shortfall); new requests lease anew.
   */
  forgetAll(): void {
    for (const st of this.accounts.values()) {
      const l = st.lease;
      if (!l) continue;
      l.closing = true;
      l.remaining = 0;
      st.lease = null;
    }
    for (const l of this.draining) l.remaining = 0;
    this.draining.clear();
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
    let wait: WaitWindow | null = null;
    try {
      while (st.waiters.length) {
        const w = st.waiters[0];
        const r = this.tryTake(st, w.amount);
        if (r) {
          st.waiters.shift();
          w.resolve(r);
          wait = null;
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
            wait = waitWindow(wait, now, ledgerLeft, this.opts.waitMs);
            // Funds came back to this lease while the ledger was asked (settled requests): try again at once.
            if (left >= w.amount) continue;
            if (now < wait.until) {
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
          wait = null;
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
    await this.giveBackDraining();
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
      await this.giveBack(lease, 'credit lease: unused part returned');
    }
  }

  /** What settlements left on retired leases still draining (their open reservations) goes back to the account. */
  private async giveBackDraining(): Promise<void> {
    for (const lease of this.draining)
      if (lease.remaining > 0) await this.giveBack(lease, 'credit lease retired: settled part returned');
  }

  /**
   * Gives back what no request has reserved from a lease; the hold stays open for the reservations. A return that
   * fails is not put back in memory: the hold keeps it until the lease is released.
   */
  private giveBack(lease: Lease, memo: string): Promise<void> {
    const amount = lease.remaining;
    if (amount <= 0) return Promise.resolve();
    lease.remaining = 0;
    const st = this.accounts.get(lease.apiKeyId ?? lease.accountId);
    if (st) st.returning += amount;
    const p = releaseHoldPart(this.db, {
      holdId: lease.holdId,
      amount,
      idempotencyKey: `lease-return:${lease.holdId}:${++lease.returns}`,
      memo,
    })
      .then(
        () => undefined,
        (e: Error) => this.opts.logger?.warn({ err: e.message, holdId: lease.holdId }, 'credit lease return failed'),
      )
      .finally(() => {
        if (st) st.returning -= amount;
        this.pending.delete(p);
      });
    this.pending.add(p);
    lease.givingBack = p;
    return p;
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
    // An aged lease with reservations open gives back its unreserved part before the new lease asks the ledger.
    if (lease) await this.retire(lease);
    const holderId = await this.opts.holderId?.();
    const holdId = randomUUID();
    const rotateAt = now + this.opts.leaseTtlMs;
    const granted = await placeFlexibleHold(this.db, {
      holderId,
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
      givingBack: null,
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

  /**
   * Takes the lease out of service. With nothing open against it, it goes to the flush for release; with
   * reservations open, it gives back at once what they did not reserve (the returned promise) and drains.
   */
  private retire(lease: Lease): Promise<void> | null {
    if (lease.closing) return lease.givingBack;
    lease.closing = true;
    const st = this.accounts.get(lease.apiKeyId ?? lease.accountId);
    if (st?.lease === lease) st.lease = null;
    if (lease.inflight === 0) {
      this.sink.release(lease.holdId);
      return null;
    }
    this.draining.add(lease);
    return this.giveBack(lease, 'credit lease retired: unreserved part returned');
  }

  /** The last reservation of a retired lease is over: release it, after its give-back if one is under way. */
  private released(lease: Lease): void {
    this.draining.delete(lease);
    if (lease.givingBack) {
      const p = lease.givingBack.then(() => this.sink.release(lease.holdId));
      const done = p.finally(() => this.pending.delete(done));
      this.pending.add(done);
    } else this.sink.release(lease.holdId);
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
        const { bill, covered, remaining } = settlement(cost, reserved, lease.remaining);
        lease.remaining = remaining;
        if (covered > 0) this.opts.onCharged?.(usage.operation, usage.model, covered);
        this.sink.charge(usage, lease.accountId, lease.holdId, covered, bill - covered);
        if (lease.closing && lease.inflight === 0) this.released(lease);
        return bill;
      },
      cancel: (usage) => {
        if (!finish()) return;
        lease.remaining += reserved;
        if (usage) this.sink.charge(usage, lease.accountId, lease.holdId, 0, 0);
        if (lease.closing && lease.inflight === 0) this.released(lease);
      },
    };
  }
}
