import type { Db } from '../db';
import { tx } from '../db';

/**
 * Counting semaphores in Postgres, shared by every worker process: a slot is a lease of `holder` under
 * (scope, key), at most `cap` holders at once. Leases expire (a holder that died frees its slot) and are released
 * when the work is done. Taking a slot never blocks: a caller that gets none is queued (first come, first served)
 * and told how many rounds of holders are ahead of it, so it can wait where waiting costs nothing (a workflow
 * timer) for about that long instead of asking again and again.
 */

export interface SlotSpec {
  scope: string;
  key: string;
  cap: number;
}

export interface SlotGrant {
  granted: boolean;
  /** Not granted: rounds of `cap` holders before this one's turn (at least 1), in the fullest of the slots. */
  rounds?: number;
}

/**
 * Takes a slot in each of `slots` for `holder`, all or none, for `leaseMs`; when not granted, the holder keeps its
 * place in each full slot's queue for `waitLeaseMs` (it must ask again within that time). A holder that already
 * holds a slot keeps it (its lease renewed): a retried activity takes its own slot again.
 */
export async function acquireSlots(
  db: Db,
  slots: SlotSpec[],
  holder: string,
  leaseMs: number,
  waitLeaseMs: number,
): Promise<SlotGrant> {
  // One order of locks for every caller, so two callers taking overlapping slots cannot deadlock.
  const ordered = [...slots].sort((a, b) => `${a.scope}\n${a.key}`.localeCompare(`${b.scope}\n${b.key}`));
  return tx(db, async (c) => {
    let rounds = 0;
    const full: SlotSpec[] = [];
    for (const s of ordered) {
      await c.query('SELECT pg_advisory_xact_lock(hashtext($1), hashtext($2))', [s.scope, s.key]);
      await c.query('DELETE FROM job_slots WHERE scope = $1 AND key = $2 AND expires_at < now()', [s.scope, s.key]);
      const r = await c.query(
        `WITH me AS (SELECT held, since FROM job_slots WHERE scope = $1 AND key = $2 AND holder = $3)
         SELECT count(*) FILTER (WHERE j.held)::int AS holding,
                count(*) FILTER (WHERE NOT j.held AND j.since < COALESCE((SELECT since FROM me), 'infinity'))::int
                  AS ahead,
                COALESCE((SELECT held FROM me), false) AS mine
           FROM job_slots j WHERE j.scope = $1 AND j.key = $2`,
        [s.scope, s.key, holder],
      );
      const { holding, ahead, mine } = r.rows[0] as { holding: number; ahead: number; mine: boolean };
      // Those who came first go first: a slot is free for this holder only when fewer wait before it than are free.
      const behind = ahead - (s.cap - holding);
      if (!mine && behind >= 0) {
        rounds = Math.max(rounds, Math.floor(behind / s.cap) + 1);
        full.push(s);
      }
    }
    const granted = rounds === 0;
    // Granted: a slot in each. Not: a place in the queue of each full one (only: elsewhere it would hold others up).
    for (const s of granted ? ordered : full)
      await c.query(
        `INSERT INTO job_slots (scope, key, holder, held, expires_at)
         VALUES ($1, $2, $3, $4, now() + $5::float8 * interval '1 millisecond')
         ON CONFLICT (scope, key, holder) DO UPDATE SET held = job_slots.held OR EXCLUDED.held,
           expires_at = CASE WHEN job_slots.held AND NOT EXCLUDED.held THEN job_slots.expires_at
                             ELSE EXCLUDED.expires_at END`,
        [s.scope, s.key, holder, granted, granted ? leaseMs : waitLeaseMs],
      );
    return granted ? { granted } : { granted, rounds };
  });
}

/** Gives back `holder`'s slots and places in queues (those it does not have are ignored). */
export async function releaseSlots(db: Db, slots: Omit<SlotSpec, 'cap'>[], holder: string): Promise<void> {
  for (const s of slots)
    await db.query('DELETE FROM job_slots WHERE scope = $1 AND key = $2 AND holder = $3', [s.scope, s.key, holder]);
}

/**
 * A wait before looking again: `baseMs` to a quarter more, so waiters of one round do not all come back at once
 * (not more: a place at the head of the queue stays unused until its waiter comes back).
 */
export const jittered = (baseMs: number) => Math.round(baseMs * (1 + Math.random() / 4));
