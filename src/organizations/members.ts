import type { Queryable } from '../db';
import { conflict } from '../errors';
import { unix } from './ids';

/** An organization's members: its console logins, with OpenAI's organization role (migration 213). */
export interface MemberRow {
  id: string;
  email: string;
  org_role: 'owner' | 'reader';
  created_at: Date;
}
const COLUMNS = 'id, email, org_role, created_at';

export const userObject = (u: MemberRow) => ({
  object: 'organization.user' as const,
  id: u.id,
  name: u.email,
  email: u.email,
  role: u.org_role,
  added_at: unix(u.created_at)!,
});

export async function getMember(db: Queryable, accountId: string, id: string): Promise<MemberRow | null> {
  const r = await db.query(
    `SELECT ${COLUMNS} FROM console_users WHERE id = $1 AND account_id = $2 AND removed_at IS NULL`,
    [id, accountId],
  );
  return r.rows[0] ?? null;
}

export async function listMembers(
  db: Queryable,
  accountId: string,
  opts: { after: string | null; limit: number; emails: string[] | null },
): Promise<MemberRow[] | null> {
  if (opts.after && !(await getMember(db, accountId, opts.after))) return null;
  const r = await db.query(
    `SELECT ${COLUMNS} FROM console_users
     WHERE account_id = $1 AND removed_at IS NULL AND ($2::text[] IS NULL OR lower(email) = ANY($2))
       AND ($3::uuid IS NULL OR (created_at, id) > (SELECT created_at, id FROM console_users WHERE id = $3))
     ORDER BY created_at, id LIMIT $4`,
    [accountId, opts.emails?.map((e) => e.toLowerCase()) ?? null, opts.after, opts.limit + 1],
  );
  return r.rows;
}

/**
 * Refuses a change that would leave the organization without an owner. Call in the transaction that makes the
 * change: the account row's lock orders two such changes, so two owners cannot demote each other at once.
 */
export async function keepAnOwner(c: Queryable, accountId: string, leaving: string): Promise<void> {
  await c.query('SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE', [accountId]);
  const r = await c.query(
    `SELECT count(*)::int AS n FROM console_users
     WHERE account_id = $1 AND org_role = 'owner' AND removed_at IS NULL AND disabled_at IS NULL AND id <> $2`,
    [accountId, leaving],
  );
  if (r.rows[0].n === 0) throw conflict('The organization must keep an owner: this is its last one.', 'last_owner');
}

export async function setMemberRole(
  c: Queryable,
  accountId: string,
  id: string,
  role: 'owner' | 'reader',
): Promise<MemberRow | null> {
  const r = await c.query(
    `UPDATE console_users SET org_role = $3 WHERE id = $1 AND account_id = $2 AND removed_at IS NULL
     RETURNING ${COLUMNS}`,
    [id, accountId, role],
  );
  return r.rows[0] ?? null;
}

/** Removes a member: the login is closed (its sessions end), its project memberships go; the row stays. */
export async function removeMember(c: Queryable, accountId: string, id: string): Promise<boolean> {
  const r = await c.query(
    `UPDATE console_users SET removed_at = now(), disabled_at = COALESCE(disabled_at, now())
     WHERE id = $1 AND account_id = $2 AND removed_at IS NULL`,
    [id, accountId],
  );
  if (r.rowCount !== 1) return false;
  await c.query('DELETE FROM console_sessions WHERE user_id = $1', [id]);
  await c.query('DELETE FROM project_members WHERE user_id = $1', [id]);
  return true;
}

/** A project's members. */
export interface ProjectMemberRow {
  user_id: string;
  email: string;
  role: 'owner' | 'member';
  added_at: Date;
}
export const projectUserObject = (m: ProjectMemberRow) => ({
  object: 'organization.project.user' as const,
  id: m.user_id,
  name: m.email,
  email: m.email,
  role: m.role,
  added_at: unix(m.added_at)!,
});
const PM = `SELECT m.user_id, u.email, m.role, m.added_at
  FROM project_members m JOIN console_users u ON u.id = m.user_id`;

export async function getProjectMember(
  db: Queryable,
  projectId: string,
  userId: string,
): Promise<ProjectMemberRow | null> {
  const r = await db.query(`${PM} WHERE m.project_id = $1 AND m.user_id = $2`, [projectId, userId]);
  return r.rows[0] ?? null;
}

export async function listProjectMembers(
  db: Queryable,
  projectId: string,
  opts: { after: string | null; limit: number },
): Promise<ProjectMemberRow[] | null> {
  if (opts.after && !(await getProjectMember(db, projectId, opts.after))) return null;
  const r = await db.query(
    `${PM} WHERE m.project_id = $1
       AND ($2::uuid IS NULL OR (m.added_at, m.user_id) >
            (SELECT added_at, user_id FROM project_members WHERE project_id = $1 AND user_id = $2))
     ORDER BY m.added_at, m.user_id LIMIT $3`,
    [projectId, opts.after, opts.limit + 1],
  );
  return r.rows;
}

/** Adds (or re-roles) a member of the organization to a project. */
export async function putProjectMember(
  c: Queryable,
  accountId: string,
  projectId: string,
  userId: string,
  role: 'owner' | 'member',
): Promise<ProjectMemberRow> {
  await c.query(
    `INSERT INTO project_members (project_id, account_id, user_id, role) VALUES ($1, $2, $3, $4)
     ON CONFLICT (project_id, user_id) DO UPDATE SET role = EXCLUDED.role`,
    [projectId, accountId, userId, role],
  );
  return (await getProjectMember(c, projectId, userId))!;
}

export async function removeProjectMember(c: Queryable, projectId: string, userId: string): Promise<boolean> {
  const r = await c.query('DELETE FROM project_members WHERE project_id = $1 AND user_id = $2', [projectId, userId]);
  return r.rowCount === 1;
}
