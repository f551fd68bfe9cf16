import { randomBytes, scryptSync } from 'node:crypto';
import {
  dateParam,
  intParam,
  optionalIntParam,
  requiredString,
  stringField,
  timeZoneParam,
  uuidParam,
} from '../../../src/console/params';
import { LoginRateLimiter } from '../../../src/console/rateLimit';
import { needsRehash, passwordProblem, verifyPassword } from '../../../src/auth/passwords';
import { sessionCookie } from '../../../src/console/auth';
import { ApiError } from '../../../src/errors';

/** The console API's parameter checks, its sign-in limiter, stored password hashes and the session cookie. */

function refusal(fn: () => unknown): { param: string | null; message: string } {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(ApiError);
    expect((e as ApiError).status).toBe(400);
    return { param: (e as ApiError).param, message: (e as ApiError).message };
  }
  throw new Error('accepted');
}

test('integers in range, with a default when absent', () => {
  expect(intParam(undefined, 'limit', 50, 1, 100)).toBe(50);
  expect(intParam('', 'limit', 50, 1, 100)).toBe(50);
  expect(intParam('7', 'limit', 50, 1, 100)).toBe(7);
  for (const bad of ['0', '101', '1.5', 'x', '1e400'])
    expect(refusal(() => intParam(bad, 'limit', 50, 1, 100))).toEqual({
      param: 'limit',
      message: 'limit must be an integer from 1 to 100',
    });
  expect(optionalIntParam(undefined, 'offset', 0, 10)).toBeUndefined();
  expect(optionalIntParam('3', 'offset', 0, 10)).toBe(3);
});

test('UUIDs (lower-cased), dates YYYY-MM-DD that exist in 1970-9999, IANA time zones', () => {
  expect(uuidParam('0123ABCD-0123-4567-89AB-0123456789AB', 'id')).toBe('0123abcd-0123-4567-89ab-0123456789ab');
  expect(refusal(() => uuidParam('nope', 'id')).param).toBe('id');
  expect(dateParam('2026-02-28', 'from')).toBe('2026-02-28');
  for (const bad of ['2026-02-30', '2026-2-1', '26-01-01', 5, '2026-01-01T00:00:00Z'])
    expect(refusal(() => dateParam(bad, 'from')).message).toBe('from must be a date YYYY-MM-DD');
  expect(refusal(() => dateParam('1969-12-31', 'from')).message).toBe('from must be a date in the years 1970 to 9999');
  expect(timeZoneParam(undefined, 'Asia/Ho_Chi_Minh')).toBe('Asia/Ho_Chi_Minh');
  expect(timeZoneParam('Etc/GMT+7', 'UTC')).toBe('Etc/GMT+7');
  expect(refusal(() => timeZoneParam('Mars/Olympus', 'UTC')).message).toBe('unknown time zone "Mars/Olympus"');
  expect(refusal(() => timeZoneParam('UTC; DROP', 'UTC')).param).toBe('tz');
});

test('string fields: trimmed, bounded, real text; required strings taken as sent, never coerced', () => {
  expect(stringField({ name: '  Ops team ' }, 'name', { max: 20 })).toBe('Ops team');
  expect(stringField({}, 'note', { max: 20, optional: true })).toBe('');
  expect(refusal(() => stringField({}, 'name', { max: 20 })).message).toBe('name is required');
  expect(refusal(() => stringField({ name: 'x'.repeat(21) }, 'name', { max: 20 })).message).toBe(
    'name must be 0 to 20 characters',
  );
  expect(refusal(() => stringField({ name: ' a ' }, 'name', { min: 2, max: 20 })).param).toBe('name');
  expect(refusal(() => stringField({ name: 'a\u0000b' }, 'name', { max: 20 })).param).toBe('name');
  expect(refusal(() => stringField({ name: 5 }, 'name', { max: 20 })).message).toBe('name must be a string');
  expect(requiredString({ password: '  spaced  ' }, 'password')).toBe('  spaced  ');
  expect(refusal(() => requiredString({ password: { toString: 1 } }, 'password')).message).toBe(
    'password must be a string',
  );
});

test('sign-ins: failures per email+IP and per IP in a sliding window; a success refunds its attempt', () => {
  const l = new LoginRateLimiter({ perKey: 3, perIp: 5, windowMs: 60_000 });
  const t = 1_000_000;
  expect([0, 1, 2].map((i) => l.attempt('a@x', '1.1.1.1', t + i))).toEqual([0, 0, 0]);
  expect(l.attempt('a@x', '1.1.1.1', t + 10_000)).toBe(50); // the first leaves the window at t + 60 s
  expect(l.attempt('a@x', '2.2.2.2', t + 10_000)).toBe(0); // another IP: its own count
  expect(l.attempt('b@x', '1.1.1.1', t + 10_000)).toBe(0); // 4th from this IP
  expect(l.attempt('c@x', '1.1.1.1', t + 10_000)).toBe(0); // 5th
  expect(l.attempt('d@x', '1.1.1.1', t + 10_000)).toBe(50); // the IP's limit, whatever the email
  expect(l.attempt('a@x', '1.1.1.1', t + 60_000)).toBe(0); // the first attempts left the window
  const s = new LoginRateLimiter({ perKey: 2, perIp: 2, windowMs: 60_000 });
  s.attempt('a@x', '9.9.9.9', t);
  s.succeeded('a@x', '9.9.9.9');
  expect(s.attempt('a@x', '9.9.9.9', t + 1)).toBe(0);
  expect(s.attempt('a@x', '9.9.9.9', t + 2)).toBe(0);
  expect(s.attempt('a@x', '9.9.9.9', t + 3)).toBe(60); // at least a second, rounded up
});

/** A stored hash in our format with chosen (cheap) parameters, as an older version of the gateway wrote them. */
const stored = (pw: string, n: number, r = 8, p = 1) => {
  const salt = randomBytes(16);
  const hash = scryptSync(pw.normalize('NFKC'), salt, 32, { N: n, r, p });
  return ['scrypt', n, r, p, salt.toString('base64url'), hash.toString('base64url')].join('$');
};

test('stored hashes verify by their own parameters; old ones need a rehash; foreign ones never verify', async () => {
  const old = stored('correct horse', 1 << 10);
  expect(await verifyPassword('correct horse', old)).toBe(true);
  expect(await verifyPassword('correct horse ', old)).toBe(false);
  expect(await verifyPassword('ﬁ ligature', stored('fi ligature', 1 << 10))).toBe(true); // NFKC on both sides
  expect(needsRehash(old)).toBe(true);
  expect(needsRehash(`scrypt$${1 << 17}$8$1$c2FsdA$${Buffer.alloc(32).toString('base64url')}`)).toBe(false);
  for (const foreign of ['', 'bcrypt$x', '$2b$10$abc', `scrypt$${1 << 20}$8$1$c2FsdA$aGFzaA`, 'scrypt$0$8$1$a$b'])
    expect(await verifyPassword('x', foreign)).toBe(false);
});

test('password rules: 10 to 200 characters of text', () => {
  expect(passwordProblem('x'.repeat(10))).toBeNull();
  expect(passwordProblem('x'.repeat(9))).toBe('password must be at least 10 characters');
  expect(passwordProblem('x'.repeat(201))).toBe('password must be at most 200 characters');
  expect(passwordProblem(1234567890)).toBe('password must be a string');
});

test('the session cookie: console path, HttpOnly, SameSite=Strict; Secure behind TLS; cleared by Max-Age=0', () => {
  const c = sessionCookie('tok', { expires: new Date(Date.UTC(2026, 0, 2)), secure: true });
  expect(c).toMatch(
    /^[\w-]+=tok; Path=\/console; HttpOnly; SameSite=Strict; Expires=Fri, 02 Jan 2026 00:00:00 GMT; Secure$/,
  );
  expect(sessionCookie('', { expires: null, secure: false })).toMatch(/; Max-Age=0$/);
});
