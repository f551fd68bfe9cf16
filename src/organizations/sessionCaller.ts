import type { Queryable } from '../db';
import { notFound } from '../errors';
import type { AuditActor } from './audit';
import type { OrgCaller } from './http';
import { isUuid } from './ids';

/** A console session as the organizations room needs it (src/console/sessions.ts has the whole of it). */
export interface ConsoleSessionUser {
  userId: string;
  accountId: string;
  email: string;
  /** The console role: an operator runs the gateway and sees every organization. */
  role: 'customer' | 'operator';
}

/** A signed-in console user, as OpenAI's audit log names a session's actor. */
export const sessionActor = (u: { userId: string; email: string }, ip: string): AuditActor => ({
  type: 'session',
  session: { user: { id: u.userId, email: u.email }, ip_address: ip },
});

const noSuchOrganization = (id: string) => notFound(`No organization found with id '${id.slice(0, 80)}'.`);

/**
 * The caller of an organization route from the console: a member of the organization acts with their organization
 * role (a reader changes nothing, as a reader's admin key); an operator acts in any organization as an owner. Any
 * other organization is as unknown as a made-up id (404).
 */
export async function sessionCaller(
  db: Queryable,
  s: ConsoleSessionUser,
  organizationId: string,
  ip: string,
): Promise<OrgCaller> {
  if (!isUuid(organizationId)) throw noSuchOrganization(organizationId);
  const actor = sessionActor(s, ip);
  if (s.role === 'operator') {
    const a = await db.query('SELECT 1 FROM accounts WHERE id = $1', [organizationId]);
    if (!a.rowCount) throw noSuchOrganization(organizationId);
    // An operator of another organization is no member of it: nothing they make is owned by a member.
    const own = organizationId === s.accountId;
    return { accountId: organizationId, actor, adminKeyId: null, role: 'owner', userId: own ? s.userId : null };
  }
  if (organizationId !== s.accountId) throw noSuchOrganization(organizationId);
  const r = await db.query(
    'SELECT org_role FROM console_users WHERE id = $1 AND account_id = $2 AND removed_at IS NULL',
    [s.userId, s.accountId],
  );
  if (!r.rowCount) throw noSuchOrganization(organizationId);
  return { accountId: s.accountId, actor, adminKeyId: null, role: r.rows[0].org_role, userId: s.userId };
}

/** The organizations a console user may open: an operator every one, a member their own. */
export async function organizationsOf(
  db: Queryable,
  s: ConsoleSessionUser,
): Promise<{ id: string; name: string; created_at: number }[]> {
  const r = await db.query(
    `SELECT id, name, floor(extract(epoch FROM created_at))::bigint AS created_at FROM accounts
     WHERE $1 OR id = $2 ORDER BY created_at, id LIMIT 1000`,
    [s.role === 'operator', s.accountId],
  );
  return r.rows.map((x) => ({ id: x.id, name: x.name, created_at: Number(x.created_at) }));
}
