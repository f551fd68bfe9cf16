import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';

/**
 * Slow password hashing with node:crypto scrypt and a per-user random salt. The stored string carries its own
 * parameters (scrypt$N$r$p$salt$hash), so the cost can be raised later without invalidating old hashes.
 */
const N = 1 << 14; // 16 MiB of memory per hash (128 * N * r), ~50 ms on one core
const R = 8;
const P = 1;
const KEYLEN = 32;

function scryptAsync(password: string, salt: Buffer, n: number, r: number, p: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    scrypt(password.normalize('NFKC'), salt, KEYLEN, { N: n, r, p, maxmem: 256 * n * r }, (err, key) => (err ? reject(err) : resolve(key)));
  });
}

export const MIN_PASSWORD_LENGTH = 10;
export const MAX_PASSWORD_LENGTH = 200;

/** Null when the password is acceptable, otherwise the reason. */
export function passwordProblem(pw: unknown): string | null {
  if (typeof pw !== 'string') return 'password must be a string';
  if (pw.length < MIN_PASSWORD_LENGTH) return `password must be at least ${MIN_PASSWORD_LENGTH} characters`;
  if (pw.length > MAX_PASSWORD_LENGTH) return `password must be at most ${MAX_PASSWORD_LENGTH} characters`;
  return null;
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const hash = await scryptAsync(password, salt, N, R, P);
  return ['scrypt', N, R, P, salt.toString('base64url'), hash.toString('base64url')].join('$');
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const parts = stored.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return false;
  const [n, r, p] = parts.slice(1, 4).map(Number);
  if (![n, r, p].every(Number.isSafeInteger) || n > 1 << 20) return false;
  const want = Buffer.from(parts[5], 'base64url');
  const got = await scryptAsync(password, Buffer.from(parts[4], 'base64url'), n, r, p);
  return want.length === got.length && timingSafeEqual(want, got);
}

/** A hash of a random password: verifying against it costs as much as a real check (unknown emails). */
let decoy: Promise<string> | null = null;
export function decoyHash(): Promise<string> {
  decoy ??= hashPassword(randomBytes(16).toString('hex'));
  return decoy;
}
