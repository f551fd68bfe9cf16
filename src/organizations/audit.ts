/**
 * The audit log's reading side and its actors; the chain itself (the append, the hash) is src/db/auditLog.ts, so the
 * domain's own changes (top-ups) append to it in their transactions too.
 */
import os from 'node:os';
import { tx, type Db, appendAudit, entryHash, type AuditActor, type AuditEntry } from '../db';

export { appendAudit, canonicalJson, entryHash, type AuditActor, type AuditEntry } from '../db';

/** Appends an entry in a transaction of its own (a change that is not itself a database write: a login). */
export function recordAudit(db: Db, e: AuditEntry): Promise<string> {
  return tx(db, (c) => appendAudit(c, e));
}

export interface ChainCheck {
  ok: boolean;
  entries: number;
  /** The first entry whose hash or link does not hold. */
  firstBroken: { seq: number; id: string; reason: string } | null;
}

/** Walks the whole chain in order, in pages, recomputing every hash. */
export async function verifyAuditChain(db: Db): Promise<ChainCheck> {
  let prev: Buffer | null = null;
  let after = 0;
  let entries = 0;
  for (;;) {
    const r = await db.query(
      `SELECT seq, id, account_id, type, effective_at, project, actor, resource_id, details, prev_hash, hash
       FROM audit_logs WHERE seq > $1 ORDER BY seq LIMIT 1000`,
      [after],
    );
    for (const x of r.rows) {
      entries++;
      const broken = (reason: string): ChainCheck => ({
        ok: false,
        entries,
        firstBroken: { seq: Number(x.seq), id: x.id, reason },
      });
      const linked = prev === null ? x.prev_hash === null : x.prev_hash !== null && prev.equals(x.prev_hash);
      if (!linked) return broken('its prev_hash is not the hash of the entry before it');
      if (!entryHash(prev, x).equals(x.hash)) return broken('its content does not match its hash');
      prev = x.hash;
      after = Number(x.seq);
    }
    if (r.rows.length < 1000) return { ok: true, entries, firstBroken: null };
  }
}

/** An actor for a change made with an admin key. */
export const adminKeyActor = (adminKeyId: string): AuditActor => ({
  type: 'api_key',
  api_key: { id: adminKeyId, type: 'user' },
});

/** The operator running the admin CLI, as the machine names them. */
export function operatorActor(): AuditActor {
  let user: string;
  try {
    user = os.userInfo().username;
  } catch {
    user = process.env.USER ?? 'unknown'; // no passwd entry for the uid (a container)
  }
  return { type: 'operator', operator: { user, host: os.hostname(), via: 'cli' } };
}
