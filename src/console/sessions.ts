import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Db } from '../db';
import type { Role } from './users';

/**
 * Console sessions. The cookie carries 256 random bits; the database keeps only their SHA-256. The CSRF token is
 * derived from the session token (a one-way hash under a different label), so it needs no storage, changes with
 * every session, and does not reveal the cookie to a script that reads it.
 */
export const SESSION_COOKIE = 'gw_console';
export const SESSION_TTL_MS = 12 * 60 * 60 * 1000;

export interface Session {
  userId: string;
  accountId: string;
  email: string;
  role: Role;
  csrfToken: string;
  expiresAt: Date;
}

const sha256 = (label: string, token: string) => createHash('sha256').update(label).update('\0').update(token).digest();

export function csrfTokenFor(sessionToken: string): string {
  return sha256('csrf', sessionToken).toString('base64url');
}

export function csrfMatches(sessionToken: string, presented: string): boolean {
  const want = Buffer.from(csrfTokenFor(sessionToken));
  const got = Buffer.from(presented);
  return want.length === got.length && timingSafeEqual(want, got);
}

export async function createSession(
  db: Db,
  userId: string,
  meta: { ip?: string; userAgent?: string } = {},
): Promise<{ token: string; expiresAt: Date }> {
  const token = randomBytes(32).toString('base64url');
  const expiresAt = new Date(Date.now() + SESSION_TTL_MS);
  await db.query(
    'INSERT INTO console_sessions (token_hash, user_id, expires_at, ip, user_agent) VALUES ($1, $2, $3, $4, $5)',
    [sha256('session', token), userId, expiresAt, meta.ip ?? null, (meta.userAgent ?? '').slice(0, 300) || null],
  );
  // Opportunistic clean-up of expired rows (cheap with the expiry index).
  db.query('DELETE FROM console_sessions WHERE expires_at < now()').catch(() => undefined);
  return { token, expiresAt };
}

/** The live session for a cookie value, or null (unknown, expired, or the login is disabled). */
export async function resolveSession(db: Db, token: string): Promise<Session | null> {
  if (!/^[\w-]{43}$/.test(token)) return null;
  const r = await db.query(
    `SELECT s.user_id, s.expires_at, u.account_id, u.email, u.role
       FROM console_sessions s JOIN console_users u ON u.id = s.user_id
      WHERE s.token_hash = $1 AND s.expires_at > now() AND u.disabled_at IS NULL`,
    [sha256('session', token)],
  );
  if (r.rowCount === 0) return null;
  const x = r.rows[0];
  return {
    userId: x.user_id,
    accountId: x.account_id,
    email: x.email,
    role: x.role,
    csrfToken: csrfTokenFor(token),
    expiresAt: x.expires_at,
  };
}

export async function deleteSession(db: Db, token: string): Promise<void> {
  await db.query('DELETE FROM console_sessions WHERE token_hash = $1', [sha256('session', token)]);
}
