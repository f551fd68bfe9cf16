import { randomBytes } from 'node:crypto';
import type { Queryable } from '../db';
import { hashKey } from '../auth';
import { unix } from './ids';

export interface InviteRow {
  id: string;
  email: string;
  role: 'owner' | 'reader';
  projects: { id: string; role: 'owner' | 'member' }[];
  created_at: Date;
  expires_at: Date;
  accepted_at: Date | null;
}
const COLUMNS = 'id, email, role, projects, created_at, expires_at, accepted_at';

export const inviteObject = (i: InviteRow) => ({
  object: 'organization.invite' as const,
  id: i.id,
  email: i.email,
  role: i.role,
  status: i.accepted_at ? 'accepted' : i.expires_at.getTime() <= Date.now() ? 'expired' : 'pending',
  created_at: unix(i.created_at)!,
  expires_at: unix(i.expires_at),
  accepted_at: unix(i.accepted_at),
  projects: i.projects,
});

/** Makes an invitation; its token (shown or mailed once, as a link) is returned, only its hash kept. */
export async function createInvite(
  c: Queryable,
  accountId: string,
  input: { email: string; role: 'owner' | 'reader'; projects: InviteRow['projects']; ttlMs: number },
): Promise<{ invite: InviteRow; token: string }> {
  const token = randomBytes(24).toString('base64url');
  const r = await c.query(
    `INSERT INTO invites (account_id, email, role, projects, token_hash, expires_at)
     VALUES ($1, $2, $3, $4, $5, now() + make_interval(secs => $6::double precision / 1000)) RETURNING ${COLUMNS}`,
    [accountId, input.email.toLowerCase(), input.role, JSON.stringify(input.projects), hashKey(token), input.ttlMs],
  );
  return { invite: r.rows[0], token };
}

export async function getInvite(db: Queryable, accountId: string, id: string): Promise<InviteRow | null> {
  const r = await db.query(`SELECT ${COLUMNS} FROM invites WHERE id = $1 AND account_id = $2 AND deleted_at IS NULL`, [
    id,
    accountId,
  ]);
  return r.rows[0] ?? null;
}

export async function listInvites(
  db: Queryable,
  accountId: string,
  opts: { after: string | null; limit: number },
): Promise<InviteRow[] | null> {
  if (opts.after && !(await getInvite(db, accountId, opts.after))) return null;
  const r = await db.query(
    `SELECT ${COLUMNS} FROM invites WHERE account_id = $1 AND deleted_at IS NULL
       AND ($2::text IS NULL OR (created_at, id) > (SELECT created_at, id FROM invites WHERE id = $2))
     ORDER BY created_at, id LIMIT $3`,
    [accountId, opts.after, opts.limit + 1],
  );
  return r.rows;
}

/** Deletes a pending invitation (an accepted one is history: 409 by the caller). */
export async function deleteInvite(
  c: Queryable,
  accountId: string,
  id: string,
): Promise<'deleted' | 'accepted' | null> {
  const r = await c.query(
    `UPDATE invites SET deleted_at = now() WHERE id = $1 AND account_id = $2 AND deleted_at IS NULL
       AND accepted_at IS NULL RETURNING id`,
    [id, accountId],
  );
  if (r.rowCount === 1) return 'deleted';
  return (await getInvite(c, accountId, id)) ? 'accepted' : null;
}

/**
 * Claims an invitation by its token: once (the update that finds it unclaimed wins), before it expires. Call in
 * the transaction that makes the member, so a failed sign-up leaves the invitation unclaimed.
 */
export async function claimInvite(c: Queryable, token: string): Promise<(InviteRow & { account_id: string }) | null> {
  const r = await c.query(
    `UPDATE invites SET accepted_at = now()
     WHERE token_hash = $1 AND accepted_at IS NULL AND deleted_at IS NULL AND expires_at > now()
     RETURNING account_id, ${COLUMNS}`,
    [hashKey(token)],
  );
  return r.rows[0] ?? null;
}
