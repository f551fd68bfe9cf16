import { createHash, randomBytes } from 'node:crypto';
import type { Queryable } from './pool';

/**
 * The audit log: one append-only chain (migration 211). An entry's hash is SHA-256 over the previous entry's hash
 * and the entry's canonical JSON (keys sorted, as jsonb returns them in its own order); appends are serialised by a
 * transaction-scoped advisory lock, so the chain has one order and no two entries claim the same predecessor.
 */
const AUDIT_LOCK = 727274048;

/**
 * Who did it, always in OpenAI's AuditLogActor shape (its enum has `session` and `api_key` only), so every entry the
 * Admin API shows validates against OpenAI's AuditLog:
 * - a console login: `session` with its user and IP (an operator at the console too);
 * - an operator at the CLI: `session` whose user id is `operator:<user>@<host>` (no email, no IP);
 * - a key: `api_key` (an admin key or a project key);
 * - the gateway acting on a provider's signed word (a bank feed's or VNPay's notification of a payment): `api_key`
 *   of type `service_account` with id `system:<provider>` (the provider's webhook credential is that key).
 * A failed login's user may be unknown (no id).
 */
export type AuditActor =
  | { type: 'session'; session: { user: { id?: string; email?: string }; ip_address?: string } }
  | {
      type: 'api_key';
      api_key: {
        id: string;
        type: 'user' | 'service_account';
        user?: { id: string; email: string };
        service_account?: { id: string };
      };
    }
  | null;

/** The gateway acting on a payment provider's notification (see AuditActor). */
export const systemActor = (service: string): AuditActor => ({
  type: 'api_key',
  api_key: { id: `system:${service}`, type: 'service_account', service_account: { id: `system:${service}` } },
});

/** An operator at the CLI, as the machine names them (see AuditActor). */
export const cliActor = (user: string, host: string): AuditActor => ({
  type: 'session',
  session: { user: { id: `operator:${user}@${host}` } },
});

export interface AuditEntry {
  accountId: string | null;
  type: string;
  actor: AuditActor;
  project?: { id: string; name: string } | null;
  resourceId?: string | null;
  /** The type's own object (e.g. `project.created`: `{ id, data: { name } }`). */
  details?: Record<string, unknown>;
}

/** JSON with every object's keys sorted: the same text for the same value, however it was stored. */
export function canonicalJson(v: unknown): string {
  if (v === null || typeof v !== 'object') return JSON.stringify(v ?? null);
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  const o = v as Record<string, unknown>;
  const keys = Object.keys(o)
    .filter((k) => o[k] !== undefined)
    .sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(o[k])}`).join(',')}}`;
}

interface Hashed {
  id: string;
  account_id: string | null;
  type: string;
  effective_at: Date;
  project: unknown;
  actor: unknown;
  resource_id: string | null;
  details: unknown;
}

export function entryHash(prev: Buffer | null, e: Hashed): Buffer {
  const body = canonicalJson({
    id: e.id,
    account_id: e.account_id,
    type: e.type,
    effective_at: e.effective_at.toISOString(),
    project: e.project,
    actor: e.actor,
    resource_id: e.resource_id,
    details: e.details,
  });
  return createHash('sha256')
    .update(prev ?? Buffer.alloc(0))
    .update(body)
    .digest();
}

function actorIdentity(a: AuditActor): { id: string | null; email: string | null } {
  if (!a) return { id: null, email: null };
  if (a.type === 'session') return { id: a.session.user.id ?? null, email: a.session.user.email ?? null };
  return { id: a.api_key.id, email: a.api_key.user?.email ?? null };
}

/**
 * Appends an entry. Call it inside the transaction that makes the change (`c` a client in BEGIN), so the change and
 * its entry commit together; the lock is held to that commit.
 */
export async function appendAudit(c: Queryable, e: AuditEntry): Promise<string> {
  await c.query('SELECT pg_advisory_xact_lock($1)', [AUDIT_LOCK]);
  const last = await c.query('SELECT hash FROM audit_logs ORDER BY seq DESC LIMIT 1');
  const prev: Buffer | null = last.rows[0]?.hash ?? null;
  const row: Hashed = {
    id: `audit_log-${randomBytes(12).toString('hex')}`,
    account_id: e.accountId,
    type: e.type,
    effective_at: new Date(),
    project: e.project ?? null,
    actor: e.actor,
    resource_id: e.resourceId ?? null,
    details: e.details ?? {},
  };
  const who = actorIdentity(e.actor);
  await c.query(
    `INSERT INTO audit_logs (id, account_id, type, effective_at, project, actor, actor_id, actor_email, resource_id,
       details, prev_hash, hash)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
    [
      row.id,
      row.account_id,
      row.type,
      row.effective_at,
      row.project === null ? null : JSON.stringify(row.project),
      row.actor === null ? null : JSON.stringify(row.actor),
      who.id,
      who.email,
      row.resource_id,
      JSON.stringify(row.details),
      prev,
      entryHash(prev, row),
    ],
  );
  return row.id;
}
