import { randomBytes } from 'node:crypto';
import type { Db, Queryable } from '../db';
import { ADMIN_KEY_PREFIX, hashKey } from '../auth';

/**
 * Admin API keys: `sk-admin-` + 32 base64url chars (192 random bits), of one organization. They call
 * /v1/organization/* and nothing else; only their SHA-256 is stored (full entropy: a fast hash is right).
 */

export interface AdminKeyRow {
  id: string;
  account_id: string;
  name: string;
  redacted_value: string;
  owner_user_id: string | null;
  created_at: Date;
  last_used_at: Date | null;
  expires_at: Date | null;
}

export interface AdminPrincipal {
  accountId: string;
  adminKeyId: string;
  /** The key acts as its owner: with the owner's organization role (no owner: made by the operator, an owner). */
  ownerUserId: string | null;
  role: 'owner' | 'reader';
}

const COLUMNS = 'id, account_id, name, redacted_value, owner_user_id, created_at, last_used_at, expires_at';

export async function createAdminKey(
  db: Queryable,
  accountId: string,
  opts: { name?: string; expiresInSeconds?: number; ownerUserId?: string | null } = {},
): Promise<{ row: AdminKeyRow; value: string }> {
  const value = ADMIN_KEY_PREFIX + randomBytes(24).toString('base64url');
  const redacted = `${value.slice(0, ADMIN_KEY_PREFIX.length + 4)}...${value.slice(-4)}`;
  const r = await db.query(
    `INSERT INTO admin_api_keys (account_id, name, redacted_value, key_hash, owner_user_id, expires_at)
     VALUES ($1, $2, $3, $4, $5, CASE WHEN $6::int IS NULL THEN NULL ELSE now() + make_interval(secs => $6::int) END)
     RETURNING ${COLUMNS}`,
    [accountId, opts.name ?? '', redacted, hashKey(value), opts.ownerUserId ?? null, opts.expiresInSeconds ?? null],
  );
  return { row: r.rows[0], value };
}

export async function listAdminKeys(
  db: Queryable,
  accountId: string,
  opts: { after: string | null; limit: number; order: 'asc' | 'desc' },
): Promise<AdminKeyRow[] | null> {
  const cmp = opts.order === 'asc' ? '>' : '<';
  const dir = opts.order === 'asc' ? 'ASC' : 'DESC';
  if (opts.after) {
    const c = await db.query('SELECT 1 FROM admin_api_keys WHERE id = $1 AND account_id = $2', [opts.after, accountId]);
    if (c.rowCount === 0) return null;
  }
  const r = await db.query(
    `SELECT ${COLUMNS} FROM admin_api_keys
     WHERE account_id = $1 AND deleted_at IS NULL
       AND ($2::text IS NULL OR (created_at, id) ${cmp} (SELECT created_at, id FROM admin_api_keys WHERE id = $2))
     ORDER BY created_at ${dir}, id ${dir} LIMIT $3`,
    [accountId, opts.after, opts.limit + 1],
  );
  return r.rows;
}

export async function getAdminKey(db: Queryable, accountId: string, id: string): Promise<AdminKeyRow | null> {
  const r = await db.query(
    `SELECT ${COLUMNS} FROM admin_api_keys WHERE id = $1 AND account_id = $2 AND deleted_at IS NULL`,
    [id, accountId],
  );
  return r.rows[0] ?? null;
}

/** Whether `value` is a live admin key of the account (the demo seed keeps its key across restarts). */
export async function isLiveAdminKey(db: Queryable, accountId: string, value: string): Promise<boolean> {
  const r = await db.query(
    'SELECT 1 FROM admin_api_keys WHERE key_hash = $1 AND account_id = $2 AND deleted_at IS NULL',
    [hashKey(value), accountId],
  );
  return r.rowCount === 1;
}

export async function deleteAdminKey(db: Queryable, accountId: string, id: string): Promise<boolean> {
  const r = await db.query(
    'UPDATE admin_api_keys SET deleted_at = now() WHERE id = $1 AND account_id = $2 AND deleted_at IS NULL',
    [id, accountId],
  );
  return r.rowCount === 1;
}

/**
 * Resolves admin keys, with a short cache as the project keys' (src/auth/apiKeys.ts): a deleted key stops working
 * within `ttlMs`. last_used_at is written at most once a minute per key, off the request's path.
 */
export class AdminKeyResolver {
  private cache = new Map<string, { p: AdminPrincipal | null; expiresAt: number | null; at: number }>();
  private lastUsedWrites = new Map<string, number>();
  constructor(
    private db: Db,
    private ttlMs = 2000,
  ) {}

  async resolve(key: string): Promise<AdminPrincipal | null> {
    if (!key.startsWith(ADMIN_KEY_PREFIX) || key.length > 200) return null;
    const now = Date.now();
    let hit = this.cache.get(key);
    if (!hit || now - hit.at >= this.ttlMs) {
      const r = await this.db.query(
        // A removed owner's keys stop working with them.
        `SELECT k.id, k.account_id, k.expires_at, k.owner_user_id, COALESCE(u.org_role, 'owner') AS role
         FROM admin_api_keys k LEFT JOIN console_users u ON u.id = k.owner_user_id
         WHERE k.key_hash = $1 AND k.deleted_at IS NULL AND u.removed_at IS NULL`,
        [hashKey(key)],
      );
      const x = r.rows[0];
      hit = {
        p: x ? { accountId: x.account_id, adminKeyId: x.id, ownerUserId: x.owner_user_id, role: x.role } : null,
        expiresAt: x?.expires_at ? x.expires_at.getTime() : null,
        at: now,
      };
      this.cache.delete(key);
      this.cache.set(key, hit);
      // Bounded: anyone can send distinct keys; the oldest entries go first.
      if (this.cache.size > 10_000) this.cache.delete(this.cache.keys().next().value!);
    }
    if (!hit.p || (hit.expiresAt !== null && now >= hit.expiresAt)) return null;
    this.touch(hit.p.adminKeyId, now);
    return hit.p;
  }

  private touch(id: string, now: number): void {
    if (now - (this.lastUsedWrites.get(id) ?? 0) < 60_000) return;
    this.lastUsedWrites.set(id, now);
    this.db.query('UPDATE admin_api_keys SET last_used_at = now() WHERE id = $1', [id]).catch(() => undefined);
  }
}
