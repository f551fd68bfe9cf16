import type { Queryable } from '../db';
import { createApiKey } from '../auth';
import { unix } from './ids';

export interface ServiceAccountRow {
  id: string;
  project_id: string;
  name: string;
  role: 'owner' | 'member';
  created_at: Date;
}

const COLUMNS = 'id, project_id, name, role, created_at';

export const serviceAccountObject = (s: ServiceAccountRow) => ({
  object: 'organization.project.service_account' as const,
  id: s.id,
  name: s.name,
  role: s.role,
  created_at: unix(s.created_at)!,
});

/** Creates a service account and its API key (the key's value is shown this once). Call inside a transaction. */
export async function createServiceAccount(
  c: Queryable,
  accountId: string,
  projectId: string,
  name: string,
): Promise<{ sa: ServiceAccountRow; key: { id: string; value: string; name: string; createdAt: Date } }> {
  const r = await c.query(
    `INSERT INTO service_accounts (account_id, project_id, name) VALUES ($1, $2, $3) RETURNING ${COLUMNS}`,
    [accountId, projectId, name],
  );
  const sa: ServiceAccountRow = r.rows[0];
  const k = await createApiKey(c, accountId, 'Secret Key', { projectId, serviceAccountId: sa.id });
  return { sa, key: { id: k.id, value: k.key, name: k.name, createdAt: new Date(k.createdAt) } };
}

export async function getServiceAccount(
  db: Queryable,
  accountId: string,
  projectId: string,
  id: string,
): Promise<ServiceAccountRow | null> {
  const r = await db.query(
    `SELECT ${COLUMNS} FROM service_accounts
     WHERE id = $1 AND account_id = $2 AND project_id = $3 AND deleted_at IS NULL`,
    [id, accountId, projectId],
  );
  return r.rows[0] ?? null;
}

export async function listServiceAccounts(
  db: Queryable,
  accountId: string,
  projectId: string,
  opts: { after: string | null; limit: number },
): Promise<ServiceAccountRow[] | null> {
  if (opts.after && !(await getServiceAccount(db, accountId, projectId, opts.after))) return null;
  const r = await db.query(
    `SELECT ${COLUMNS} FROM service_accounts
     WHERE account_id = $1 AND project_id = $2 AND deleted_at IS NULL
       AND ($3::text IS NULL OR (created_at, id) > (SELECT created_at, id FROM service_accounts WHERE id = $3))
     ORDER BY created_at, id LIMIT $4`,
    [accountId, projectId, opts.after, opts.limit + 1],
  );
  return r.rows;
}

/** Deletes a service account and revokes its keys. Call inside a transaction. */
export async function deleteServiceAccount(
  c: Queryable,
  accountId: string,
  projectId: string,
  id: string,
): Promise<boolean> {
  const r = await c.query(
    `UPDATE service_accounts SET deleted_at = now()
     WHERE id = $1 AND account_id = $2 AND project_id = $3 AND deleted_at IS NULL`,
    [id, accountId, projectId],
  );
  if (r.rowCount !== 1) return false;
  await c.query('UPDATE api_keys SET revoked_at = now() WHERE service_account_id = $1 AND revoked_at IS NULL', [id]);
  return true;
}
