import { randomBytes, scryptSync } from 'node:crypto';
import { startGateway, type TestGateway } from '../support/gateway';
import { loadConfig } from '../../src/config';
import { hashPassword, needsRehash, verifyPassword } from '../../src/auth/passwords';
import { createLogin, findLoginByEmail } from '../../src/console/users';
import { ConsoleClient } from '../e2e/consoleClient';

/** Console passwords: scrypt at the OWASP parameters; older hashes keep working and are upgraded at sign-in. */

let gw: TestGateway;
beforeAll(async () => {
  gw = await startGateway({}, { temporal: false });
});
afterAll(() => gw.close());

/** A hash as the gateway wrote them before (N=2^14), made independently with node:crypto. */
function legacyHash(password: string): string {
  const salt = randomBytes(16);
  const hash = scryptSync(password.normalize('NFKC'), salt, 32, { N: 1 << 14, r: 8, p: 1 });
  return ['scrypt', 1 << 14, 8, 1, salt.toString('base64url'), hash.toString('base64url')].join('$');
}

test('new hashes use N=2^17, r=8, p=1 and verify', async () => {
  const h = await hashPassword('correct horse battery');
  expect(h).toMatch(/^scrypt\$131072\$8\$1\$[\w-]{22}\$[\w-]{43}$/);
  expect(needsRehash(h)).toBe(false);
  expect(await verifyPassword('correct horse battery', h)).toBe(true);
  expect(await verifyPassword('correct horse batterx', h)).toBe(false);
});

test('a login with a legacy hash signs in and is rehashed; a wrong password changes nothing', async () => {
  const acc = await gw.account(0, 'legacy');
  const email = `legacy-${randomBytes(4).toString('hex')}@example.com`;
  const password = 'an old password 1';
  const user = await createLogin(gw.deps.db, { accountId: acc.accountId, email, password });
  const old = legacyHash(password);
  await gw.deps.db.query('UPDATE console_users SET password_hash = $2 WHERE id = $1', [user.id, old]);
  expect(needsRehash(old)).toBe(true);

  expect((await new ConsoleClient(gw.url).signIn(email, 'not the password')).status).toBe(401);
  expect((await findLoginByEmail(gw.deps.db, email))!.passwordHash).toBe(old);

  expect((await new ConsoleClient(gw.url).signIn(email, password)).status).toBe(200);
  const upgraded = (await findLoginByEmail(gw.deps.db, email))!.passwordHash;
  expect(upgraded).toMatch(/^scrypt\$131072\$8\$1\$/);
  expect(await verifyPassword(password, upgraded)).toBe(true);
  expect((await new ConsoleClient(gw.url).signIn(email, password)).status).toBe(200);
  expect((await findLoginByEmail(gw.deps.db, email))!.passwordHash).toBe(upgraded); // rehashed once only
});

test('CONSOLE_SECURE_COOKIES defaults to on for an https PUBLIC_BASE_URL; the variable still decides when set', () => {
  const saved = process.env.CONSOLE_SECURE_COOKIES;
  try {
    delete process.env.CONSOLE_SECURE_COOKIES;
    expect(loadConfig({ publicBaseUrl: 'https://gw.example.com' }).consoleSecureCookies).toBe(true);
    expect(loadConfig({ publicBaseUrl: 'http://127.0.0.1:8080' }).consoleSecureCookies).toBe(false);
    process.env.CONSOLE_SECURE_COOKIES = 'false';
    expect(loadConfig({ publicBaseUrl: 'https://gw.example.com' }).consoleSecureCookies).toBe(false);
    process.env.CONSOLE_SECURE_COOKIES = 'true';
    expect(loadConfig({ publicBaseUrl: 'http://127.0.0.1:8080' }).consoleSecureCookies).toBe(true);
  } finally {
    if (saved === undefined) delete process.env.CONSOLE_SECURE_COOKIES;
    else process.env.CONSOLE_SECURE_COOKIES = saved;
  }
});

test('a gateway whose public URL is https sets Secure session cookies', async () => {
  const secure = await startGateway({ publicBaseUrl: 'https://gw.example.com' }, { temporal: false });
  try {
    const acc = await secure.account(0, 'secure');
    const email = `secure-${randomBytes(4).toString('hex')}@example.com`;
    await createLogin(secure.deps.db, { accountId: acc.accountId, email, password: 'a secure password' });
    const res = await new ConsoleClient(secure.url).signIn(email, 'a secure password');
    expect(res.status).toBe(200);
    expect(res.headers.get('set-cookie')).toMatch(/; Secure$/);
  } finally {
    await secure.close();
  }
});
