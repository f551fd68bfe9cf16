import { type Db, isUnstorableText, PG_ERROR, pgErrorCode } from '../db';
import { hashPassword, needsRehash, passwordProblem } from '../auth';

/** Console logins (console_users): one per email, linked to an account, role customer or operator. */

export type Role = 'customer' | 'operator';

export interface ConsoleUser {
  id: string;
  accountId: string;
  accountName: string;
  email: string;
  role: Role;
  createdAt: string;
  disabledAt: string | null;
}

export class ConsoleUserError extends Error {
  constructor(
    message: string,
    public readonly param: string,
    public readonly code: 'invalid' | 'exists' | 'not_found',
  ) {
    super(message);
  }
}

const EMAIL_RE = /^[^\s@]{1,64}@[^\s@]{1,255}$/;

export function normalizeEmail(email: unknown): string {
  if (typeof email !== 'string' || !EMAIL_RE.test(email.trim()) || isUnstorableText(email))
    throw new ConsoleUserError('email must be an email address', 'email', 'invalid');
  return email.trim().toLowerCase();
}

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const isUuid = (s: unknown): s is string => typeof s === 'string' && UUID_RE.test(s);

function row(x: any): ConsoleUser {
  return {
    id: x.id,
    accountId: x.account_id,
    accountName: x.account_name ?? '',
    email: x.email,
    role: x.role,
    createdAt: (x.created_at as Date).toISOString(),
    disabledAt: x.disabled_at ? (x.disabled_at as Date).toISOString() : null,
  };
}

const SELECT = `SELECT u.id, u.account_id, a.name AS account_name, u.email, u.role, u.created_at, u.disabled_at
  FROM console_users u JOIN accounts a ON a.id = u.account_id`;

export async function createLogin(
  db: Db,
  a: { accountId: string; email: string; password: string; role?: Role },
): Promise<ConsoleUser> {
  if (!isUuid(a.accountId))
    throw new ConsoleUserError('accountId must be an account id (UUID)', 'account_id', 'invalid');
  const email = normalizeEmail(a.email);
  const problem = passwordProblem(a.password);
  if (problem) throw new ConsoleUserError(problem, 'password', 'invalid');
  const role: Role = a.role ?? 'customer';
  if (role !== 'customer' && role !== 'operator')
    throw new ConsoleUserError('role must be customer or operator', 'role', 'invalid');
  const acc = await db.query('SELECT 1 FROM accounts WHERE id = $1', [a.accountId]);
  if (acc.rowCount === 0) throw new ConsoleUserError(`account ${a.accountId} not found`, 'account_id', 'not_found');
  const hash = await hashPassword(a.password);
  try {
    const r = await db.query(
      `INSERT INTO console_users (account_id, email, password_hash, role) VALUES ($1, $2, $3, $4) RETURNING id`,
      [a.accountId, email, hash, role],
    );
    return (await getLogin(db, r.rows[0].id))!;
  } catch (e: any) {
    if (pgErrorCode(e) === PG_ERROR.uniqueViolation)
      throw new ConsoleUserError(`a login for ${email} already exists`, 'email', 'exists');
    throw e;
  }
}

export async function getLogin(db: Db, id: string): Promise<ConsoleUser | null> {
  const r = await db.query(`${SELECT} WHERE u.id = $1`, [id]);
  return r.rowCount ? row(r.rows[0]) : null;
}

export async function findLoginByEmail(
  db: Db,
  email: string,
): Promise<(ConsoleUser & { passwordHash: string | null }) | null> {
  const r = await db.query(
    `${SELECT.replace('u.disabled_at', 'u.disabled_at, u.password_hash')} WHERE lower(u.email) = lower($1)`,
    [email],
  );
  return r.rowCount ? { ...row(r.rows[0]), passwordHash: r.rows[0].password_hash } : null;
}

export async function listLogins(db: Db, accountId?: string): Promise<ConsoleUser[]> {
  const r = accountId
    ? await db.query(`${SELECT} WHERE u.account_id = $1 ORDER BY u.created_at`, [accountId])
    : await db.query(`${SELECT} ORDER BY u.created_at`);
  return r.rows.map(row);
}

/** Sets a new password and ends every session of the login. */
export async function setPassword(db: Db, email: string, password: string): Promise<void> {
  const problem = passwordProblem(password);
  if (problem) throw new ConsoleUserError(problem, 'password', 'invalid');
  const hash = await hashPassword(password);
  const r = await db.query('UPDATE console_users SET password_hash = $2 WHERE lower(email) = lower($1) RETURNING id', [
    normalizeEmail(email),
    hash,
  ]);
  if (r.rowCount === 0) throw new ConsoleUserError(`no login for ${email}`, 'email', 'not_found');
  await db.query('DELETE FROM console_sessions WHERE user_id = $1', [r.rows[0].id]);
}

/**
 * After a successful sign-in: rehashes a password stored with older scrypt parameters. Only if the stored hash
 * is still the one just verified, so a password changed meanwhile is not overwritten.
 */
export async function upgradePasswordHash(
  db: Db,
  userId: string,
  verifiedHash: string,
  password: string,
): Promise<boolean> {
  if (!needsRehash(verifiedHash)) return false;
  const r = await db.query('UPDATE console_users SET password_hash = $3 WHERE id = $1 AND password_hash = $2', [
    userId,
    verifiedHash,
    await hashPassword(password),
  ]);
  return r.rowCount === 1;
}

/** Disables (or re-enables) a login; disabling ends its sessions at once. */
export async function setLoginDisabled(db: Db, email: string, disabled: boolean): Promise<void> {
  const r = await db.query(
    `UPDATE console_users SET disabled_at = CASE WHEN $2 THEN COALESCE(disabled_at, now()) ELSE NULL END
      WHERE lower(email) = lower($1) RETURNING id`,
    [normalizeEmail(email), disabled],
  );
  if (r.rowCount === 0) throw new ConsoleUserError(`no login for ${email}`, 'email', 'not_found');
  if (disabled) await db.query('DELETE FROM console_sessions WHERE user_id = $1', [r.rows[0].id]);
}
