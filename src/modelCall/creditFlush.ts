import type { Db } from '../db';
import { tx, PG_ERROR, pgErrorCode } from '../db';
import { LedgerError, releaseHold, writeUsageBatch, type SettledUsage, type UsageInput } from '../billing';

interface Over {
  s: SettledUsage;
  collected: number;
  shortfall: number;
}

/** writeUsageBatch's `billed` callback: keeps in `over` each request whose bill went past what its lease covered. */
function keepOver(over: Over[]) {
  return (s: SettledUsage, cost: number, shortfall: number) => {
    if (shortfall > 0 || cost !== s.cost) over.push({ s, collected: Math.max(0, cost - s.cost), shortfall });
  };
}
import type { LeaseSink } from './creditLease';
import type { Logger } from '../observability';
import { offPath } from '../observability';

/**
 * The flush side of credit (./credit.ts): settled requests and retired leases queue here, and every `flushMs` one
 * transaction writes the queued usage records and charges (writeUsageBatch: one `charged` event per lease hold
 * per flush, each request's usage record naming it, the request id its idempotency gate); then the retired leases
 * are released. A failed flush keeps its queue for the next one, which cannot charge twice.
 */

/** A settled request waiting for the next flush: one small fixed-shape object, no copy of its usage input. */
class Settled implements SettledUsage {
  refused?: boolean;
  constructor(
    readonly usage: UsageInput,
    readonly accountId: string,
    readonly holdId: string,
    readonly cost: number,
    readonly excess: number,
  ) {}
}

/** What a committed flush reports per request whose bill went past its lease: VND collected and left uncollected. */
export type BilledHook = (operation: string, model: string, collected: number, uncollected: number) => void;

export class CreditFlush implements LeaseSink {
  private pendingUsage: Settled[] = [];
  /** Hold ids of retired leases with nothing open against them. */
  private pendingReleases: string[] = [];
  private flushing: Promise<void> | null = null;

  /**
   * `beforeFlush` runs first in every flush (the leases retire their idle ones there), `afterCharges` once the
   * charges are written, before retired leases are released (the leases give recalled funds back there).
   */
  constructor(
    private db: Db,
    private hooks: { beforeFlush(now: number): void; afterCharges?(): Promise<void>; billed?: BilledHook },
    private logger?: Logger,
  ) {}

  charge(usage: UsageInput, accountId: string, holdId: string, cost: number, excess: number): void {
    this.pendingUsage.push(new Settled(usage, accountId, holdId, cost, excess));
  }

  release(holdId: string): void {
    this.pendingReleases.push(holdId);
  }

  /** Writes queued charges and usage records in one transaction, then releases retired leases. */
  flush(): Promise<void> {
    if (this.flushing) return this.flushing.then(() => this.flush());
    this.flushing = offPath('credit flush', () => this.doFlush()).finally(() => {
      this.flushing = null;
    });
    return this.flushing;
  }

  private async doFlush(): Promise<void> {
    this.hooks.beforeFlush(Date.now());
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
          this.logger?.error({ err: (e as Error).message, requests: usage.length }, 'credit flush failed; will retry');
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
    await this.hooks
      .afterCharges?.()
      .catch((e: Error) => this.logger?.warn({ err: e.message }, 'credit lease returns failed'));
    for (const holdId of releases) {
      try {
        await releaseHold(this.db, {
          holdId,
          idempotencyKey: `lease-release:${holdId}`,
          memo: 'credit lease returned',
        });
      } catch (e) {
        this.pendingReleases.push(holdId);
      }
    }
  }

  /**
   * One transaction for the batch, its usage records written with COPY; a request already written (a flush retried
   * after a commit it did not see acknowledged) makes COPY fail with unique_violation, and the batch is written again
   * through the per-row gate, which skips it (and charges only the rows it inserts).
   */
  private async writeBatch(batch: Settled[]): Promise<void> {
    let over: Over[] = [];
    try {
      await tx(this.db, (c) => writeUsageBatch(c, batch, { copy: true, billed: keepOver(over) }));
    } catch (e) {
      if (pgErrorCode(e) !== PG_ERROR.uniqueViolation) throw e;
      over = [];
      await tx(this.db, (c) => writeUsageBatch(c, batch, { billed: keepOver(over) }));
    }
    this.report(over);
  }

  /** After the commit: what was collected beyond the leases, and what was left uncollected (metrics, log). */
  private report(over: Over[]): void {
    for (const { s, collected, shortfall } of over) {
      this.hooks.billed?.(s.usage.operation, s.usage.model, collected, shortfall);
      if (shortfall > 0)
        this.logger?.warn(
          { requestId: s.usage.id, accountId: s.accountId, shortfall, collected },
          'request bill not fully collected: shortfall recorded',
        );
    }
  }

  /** Writes settled requests one transaction each; returns those not written (database trouble: retried later). */
  private async writeOneByOne(batch: Settled[]): Promise<Settled[]> {
    for (let i = 0; i < batch.length; i++) {
      try {
        await this.writeAlone(batch[i]);
      } catch (e) {
        this.logger?.error({ err: (e as Error).message }, 'credit flush failed; will retry');
        return batch.slice(i);
      }
    }
    return [];
  }

  /** One settled request in its own transaction; a charge the ledger refuses is logged and left out. */
  private async writeAlone(s: Settled): Promise<void> {
    try {
      const over: Over[] = [];
      await tx(this.db, (c) => writeUsageBatch(c, [s], { billed: keepOver(over) }));
      this.report(over);
    } catch (e) {
      if (!(e instanceof LedgerError) || s.refused) throw e;
      this.logger?.error(
        { err: e.message, requestId: s.usage.id, holdId: s.holdId, cost: s.cost },
        'charge refused by ledger',
      );
      s.refused = true; // recorded as a usage record without a charge, its bill a shortfall
      const over: Over[] = [];
      await tx(this.db, (c) => writeUsageBatch(c, [s], { billed: keepOver(over) }));
      this.report(over);
    }
  }
}
