import { randomUUID } from 'node:crypto';
import os from 'node:os';
import type { Db } from '../db';
import { releaseHold } from '../billing';
import type { Logger } from '../observability';

/**
 * Liveness of the processes that hold credit leases (./creditLease.ts). A process registers a row in
 * credit_holders before its first lease and heartbeats it every `livenessMs`; its lease holds name it
 * (holds.holder_id). Any process (API or worker) recovers the leases of holders that stopped heartbeating: it deletes
 * their rows first (the one atomic "declared dead" step: a heartbeat racing it either lands first and keeps the
 * row, or finds the row gone) and then releases every open lease hold whose holder has no row. So a killed process's
 * leases come back within `staleAfter(livenessMs) + livenessMs`, not at their hold's expiry an hour later.
 *
 * A process that was declared dead while it still ran (stalled longer than the stale window) learns it at its next
 * heartbeat: it forgets its leases (their holds are released already) and registers again under a new id.
 */

/** How long without a heartbeat before a holder is declared dead: three missed beats. */
export function staleAfter(livenessMs: number): number {
  return 3 * livenessMs;
}

/**
 * Declares dead the holders silent for more than `staleMs` and releases the open lease holds of every holder that
 * has no row (declared dead now or earlier, or stopped without returning them). Returns the holds released.
 */
export async function recoverDeadLeases(db: Db, staleMs: number): Promise<number> {
  await db.query(`DELETE FROM credit_holders WHERE heartbeat_at < clock_timestamp() - $1::int * interval '1 ms'`, [
    Math.round(staleMs),
  ]);
  const r = await db.query(
    `SELECT h.id FROM holds h
      WHERE h.status = 'open' AND h.holder_id IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM credit_holders p WHERE p.id = h.holder_id)
      LIMIT 500`,
  );
  let n = 0;
  for (const row of r.rows as { id: string }[]) {
    const out = await releaseHold(db, {
      holdId: row.id,
      idempotencyKey: `lease-recover:${row.id}`,
      memo: 'credit lease of a stopped process recovered',
    });
    if (out.applied) n++;
  }
  return n;
}

/** This process as a lease holder: its id (registered on first use), heartbeat and unregistration. */
export class CreditHolder {
  private id = randomUUID();
  private registered: Promise<string> | null = null;
  private closed = false;

  constructor(
    private db: Db,
    /** Called when a heartbeat finds this holder declared dead: its leases are gone. */
    private onDeclaredDead: () => void,
    private logger?: Logger,
  ) {}

  /** The holder id to place lease holds under, registered (committed) before it is returned. */
  current(): Promise<string> {
    if (this.closed) {
      // Leasing again after a clean stop (a process that closes its credit and goes on, as tests do): a new holder.
      this.closed = false;
      this.id = randomUUID();
      this.registered = null;
    }
    this.registered ??= this.register(this.id);
    return this.registered;
  }

  private async register(id: string): Promise<string> {
    try {
      await this.db.query('INSERT INTO credit_holders (id, host, pid) VALUES ($1, $2, $3)', [
        id,
        os.hostname(),
        process.pid,
      ]);
      return id;
    } catch (e) {
      this.registered = null; // tried again by the next lease
      throw e;
    }
  }

  /** Heartbeats, once registered. A row gone means declared dead: forget the leases, take a new id. */
  async beat(): Promise<void> {
    if (!this.registered || this.closed) return;
    const id = await this.registered;
    const r = await this.db.query('UPDATE credit_holders SET heartbeat_at = clock_timestamp() WHERE id = $1', [id]);
    if (r.rowCount !== 0 || this.id !== id) return;
    this.logger?.warn({ holderId: id }, 'credit leases recovered by another process (no heartbeat): leasing anew');
    this.id = randomUUID();
    this.registered = null;
    this.onDeclaredDead();
  }

  /** Unregisters (clean stop, after the leases are returned): anything left open is recovered by others at once. */
  async close(): Promise<void> {
    this.closed = true;
    if (!this.registered) return;
    const id = await this.registered.catch(() => null);
    if (id) await this.db.query('DELETE FROM credit_holders WHERE id = $1', [id]);
  }
}
