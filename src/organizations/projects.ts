import type { Queryable } from '../db';
import { unix } from './ids';

export interface ProjectRow {
  id: string;
  account_id: string;
  name: string;
  is_default: boolean;
  external_key_id: string | null;
  created_at: Date;
  archived_at: Date | null;
}

const COLUMNS = 'id, account_id, name, is_default, external_key_id, created_at, archived_at';

/** OpenAI's project object. */
export const projectObject = (p: ProjectRow) => ({
  id: p.id,
  object: 'organization.project' as const,
  name: p.name,
  created_at: unix(p.created_at)!,
  archived_at: unix(p.archived_at),
  status: p.archived_at ? 'archived' : 'active',
  external_key_id: p.external_key_id,
});

export async function getProject(db: Queryable, accountId: string, id: string): Promise<ProjectRow | null> {
  const r = await db.query(`SELECT ${COLUMNS} FROM projects WHERE id = $1 AND account_id = $2`, [id, accountId]);
  return r.rows[0] ?? null;
}

export async function defaultProject(db: Queryable, accountId: string): Promise<ProjectRow> {
  const r = await db.query(`SELECT ${COLUMNS} FROM projects WHERE account_id = $1 AND is_default`, [accountId]);
  return r.rows[0];
}

/** Up to limit + 1 projects after the cursor (null: `after` names no project of the organization). */
export async function listProjects(
  db: Queryable,
  accountId: string,
  opts: { after: string | null; limit: number; includeArchived: boolean },
): Promise<ProjectRow[] | null> {
  if (opts.after && !(await getProject(db, accountId, opts.after))) return null;
  const r = await db.query(
    `SELECT ${COLUMNS} FROM projects
     WHERE account_id = $1 AND ($2 OR archived_at IS NULL)
       AND ($3::text IS NULL OR (created_at, id) > (SELECT created_at, id FROM projects WHERE id = $3))
     ORDER BY created_at, id LIMIT $4`,
    [accountId, opts.includeArchived, opts.after, opts.limit + 1],
  );
  return r.rows;
}

export async function createProject(
  db: Queryable,
  accountId: string,
  input: { name: string; externalKeyId?: string | null },
): Promise<ProjectRow> {
  const r = await db.query(
    `INSERT INTO projects (account_id, name, external_key_id) VALUES ($1, $2, $3) RETURNING ${COLUMNS}`,
    [accountId, input.name, input.externalKeyId ?? null],
  );
  return r.rows[0];
}

export async function updateProject(
  db: Queryable,
  accountId: string,
  id: string,
  input: { name?: string | null; externalKeyId?: string | null },
): Promise<ProjectRow | null> {
  const r = await db.query(
    `UPDATE projects SET name = COALESCE($3, name),
       external_key_id = CASE WHEN $4 THEN $5 ELSE external_key_id END
     WHERE id = $1 AND account_id = $2 RETURNING ${COLUMNS}`,
    [id, accountId, input.name ?? null, input.externalKeyId !== undefined, input.externalKeyId ?? null],
  );
  return r.rows[0] ?? null;
}

/** Archives a project (its keys stop working: src/auth/apiKeys.ts reads only live projects' keys). */
export async function archiveProject(db: Queryable, accountId: string, id: string): Promise<ProjectRow | null> {
  const r = await db.query(
    `UPDATE projects SET archived_at = COALESCE(archived_at, clock_timestamp())
     WHERE id = $1 AND account_id = $2 RETURNING ${COLUMNS}`,
    [id, accountId],
  );
  return r.rows[0] ?? null;
}
