import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';

/**
 * Slow password hashing with node:crypto scrypt and a per-user random salt, at the OWASP parameters
 * (N=2^17, r=8, p=1). The stored string carries its own parameters (scrypt$N$r$p$salt$hash), so hashes made with
 * older, cheaper parameters still verify, and are rehashed at the next sign-in (needsRehash).
 */
const N = 1 << 17; // 128 MiB of memory per hash (128 * N * r), a few hundred ms on one core
const R = 8;
const P = 1;
const KEYLEN = 32;
/** Bounds for parameters read back from a stored hash: ours only, so anything beyond them is not one of ours. */
const MAX_MEMORY = 128 * N * R;

/**
 * At most two hashes at once: each holds 128 MiB while it runs (libuv's four threads would otherwise allow
 * 512 MiB under a burst of sign-ins). Hashing stays off the event loop either way.
 */
const MAX_CONCURRENT = 2;
let running = 0;
const waiting: (() => void)[] = [];

async function scryptAsync(password: string, salt: Buffer, n: number, r: number, p: number): Promise<Buffer> {
  if (running >= MAX_CONCURRENT) await new Promise<void>((res) => waiting.push(res));
  running++;
  try {
    return await new Promise((resolve, reject) => {
      // maxmem: Node refuses anything above it (default 32 MiB); 128*N*r plus room for its own bookkeeping.
      scrypt(password.normalize('NFKC'), salt, KEYLEN, { N: n, r, p, maxmem: 2 * 128 * n * r }, (err, key) =>
        err ? reject(err) : resolve(key),
      );
    });
  } finally {
    running--;
    waiting.shift()?.();
  }
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

/** The parameters of a stored hash, or null when it is not a scrypt hash we could have written. */
function parse(stored: string): { n: number; r: number; p: number; salt: Buffer; hash: Buffer } | null {
  const parts = stored.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return null;
  const [n, r, p] = parts.slice(1, 4).map(Number);
  if (![n, r, p].every((x) => Number.isSafeInteger(x) && x > 0) || 128 * n * r > MAX_MEMORY || p > 16) return null;
  return { n, r, p, salt: Buffer.from(parts[4], 'base64url'), hash: Buffer.from(parts[5], 'base64url') };
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const h = parse(stored);
  if (!h) return false;
  const got = await scryptAsync(password, h.salt, h.n, h.r, h.p);
  return h.hash.length === got.length && timingSafeEqual(h.hash, got);
}

/** True when a stored hash was made with other parameters than today's: rehash it once the password is known. */
export function needsRehash(stored: string): boolean {
  const h = parse(stored);
  return !h || h.n !== N || h.r !== R || h.p !== P || h.hash.length !== KEYLEN;
}

/** A hash of a random password: verifying against it costs as much as a real check (unknown emails). */
let decoy: Promise<string> | null = null;
export function decoyHash(): Promise<string> {
  decoy ??= hashPassword(randomBytes(16).toString('hex'));
  return decoy;
}
