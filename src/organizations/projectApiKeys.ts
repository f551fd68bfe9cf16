import type { Queryable } from '../db';
import { unix } from './ids';

/** A project's API keys (the model-calling keys of src/auth/apiKeys.ts), as OpenAI's Admin API shows them. */
export interface ProjectKeyRow {
  id: string;
  name: string;
  prefix: string;
  created_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
  service_account_id: string | null;
  sa_name: string | null;
  sa_role: string | null;
  sa_created_at: Date | null;
  owner_user_id: string | null;
  user_email: string | null;
  user_created_at: Date | null;
}

const SELECT = `SELECT k.id, k.name, k.prefix, k.created_at, k.last_used_at, k.revoked_at, k.service_account_id,
    s.name AS sa_name, s.role AS sa_role, s.created_at AS sa_created_at,
    k.owner_user_id, u.email AS user_email, u.created_at AS user_created_at
  FROM api_keys k
  LEFT JOIN service_accounts s ON s.id = k.service_account_id
  LEFT JOIN console_users u ON u.id = k.owner_user_id`;

export function projectKeyObject(k: ProjectKeyRow) {
  const owner = k.service_account_id
    ? {
        type: 'service_account' as const,
        service_account: {
          id: k.service_account_id,
          name: k.sa_name ?? '',
          created_at: unix(k.sa_created_at)!,
          role: k.sa_role ?? 'member',
        },
      }
    : k.owner_user_id
      ? {
          type: 'user' as const,
          user: {
            id: k.owner_user_id,
            email: k.user_email ?? '',
            name: k.user_email ?? '',
            created_at: unix(k.user_created_at)!,
            role: 'owner',
          },
        }
      : // A key made before projects had owners (or by the operator's CLI): no owner to name.
        { type: 'user' as const };
  return {
    object: 'organization.project.api_key' as const,
    id: k.id,
    name: k.name,
    redacted_value: `${k.prefix}...`,
    created_at: unix(k.created_at)!,
    last_used_at: unix(k.last_used_at),
    owner_project_access: 'active' as const,
    owner,
  };
}

export async function getProjectKey(
  db: Queryable,
  accountId: string,
  projectId: string,
  id: string,
): Promise<ProjectKeyRow | null> {
  const r = await db.query(
    `${SELECT} WHERE k.id = $1 AND k.account_id = $2 AND k.project_id = $3 AND k.revoked_at IS NULL`,
    [id, accountId, projectId],
  );
  return r.rows[0] ?? null;
}

/** Live keys of a project, up to limit + 1 after the cursor (null: `after` is no live key of the project). */
export async function listProjectKeys(
  db: Queryable,
  accountId: string,
  projectId: string,
  opts: { after: string | null; limit: number },
): Promise<ProjectKeyRow[] | null> {
  if (opts.after && !(await getProjectKey(db, accountId, projectId, opts.after))) return null;
  const r = await db.query(
    `${SELECT} WHERE k.account_id = $1 AND k.project_id = $2 AND k.revoked_at IS NULL
       AND ($3::uuid IS NULL OR (k.created_at, k.id) > (SELECT created_at, id FROM api_keys WHERE id = $3))
     ORDER BY k.created_at, k.id LIMIT $4`,
    [accountId, projectId, opts.after, opts.limit + 1],
  );
  return r.rows;
}

/** Revokes a live key of the project (deleting, in OpenAI's words; the row stays for usage and audit). */
export async function deleteProjectKey(
  db: Queryable,
  accountId: string,
  projectId: string,
  id: string,
): Promise<boolean> {
  const r = await db.query(
    `UPDATE api_keys SET revoked_at = now()
     WHERE id = $1 AND account_id = $2 AND project_id = $3 AND revoked_at IS NULL`,
    [id, accountId, projectId],
  );
  return r.rowCount === 1;
}
