import { randomBytes } from 'node:crypto';
import { startGateway, type TestGateway } from '../support/gateway';
import { CookieJar, startIdentityProvider, type TestIdentityProvider } from '../support/oidcProvider';
import { ConsoleClient, jsonOf, makeLogin } from '../e2e/consoleClient';
import { createLogin } from '../../src/console/users';
import { createAdminKey } from '../../src/organizations';
import { adminClient } from '../support/openaiAdminSchemas';

/**
 * Console sign-in through an organization's OpenID Connect provider: a real oidc-provider in this process, the
 * gateway's relying party (openid-client) over real HTTP, the browser played by fetch with cookies and redirects
 * followed by hand.
 */

let gw: TestGateway;
let idp: TestIdentityProvider;
let org: { accountId: string };
let owner: ConsoleClient;
const domain = `sso-${randomBytes(4).toString('hex')}.example`;

beforeAll(async () => {
  // The provider listens on 127.0.0.1 over plain http: FETCH_ALLOW_HOSTS is how an operator allows such a host.
  gw = await startGateway({ fetchAllowHosts: ['127.0.0.1'] }, { temporal: false });
  idp = await startIdentityProvider(`${gw.url}/console/api/sso/callback`);
  org = await gw.account(0, 'sso org');
  const login = await makeLogin(gw, org.accountId); // an owner (every login made so is)
  owner = new ConsoleClient(gw.url);
  expect((await owner.signIn(login.email, login.password)).status).toBe(200);
  const res = await owner.request('PUT', '/console/api/sso/settings', {
    issuer: idp.issuer,
    client_id: idp.clientId,
    client_secret: idp.clientSecret,
    trusted_domains: [domain.toUpperCase()],
    default_role: 'reader',
  });
  expect(res.status).toBe(200);
});
afterAll(async () => {
  await idp?.close();
  await gw?.close();
});

interface Outcome {
  location: string;
  /** A console client holding the session the sign-in made, if it made one. */
  session: ConsoleClient | null;
}

/** A browser's sign-in: start at the gateway, sign in at the provider as `subject`, come back to the callback. */
async function ssoSignIn(
  start: { email: string } | { organization: string },
  subject: string,
  tamper: (callback: URL) => void = () => undefined,
): Promise<Outcome> {
  const jar = new CookieJar();
  const begun = await fetch(`${gw.url}/console/api/sso/start`, {
    method: 'POST',
    headers: { origin: gw.url, 'content-type': 'application/json' },
    body: JSON.stringify(start),
  });
  expect(begun.status).toBe(200);
  jar.store(gw.url, begun);
  const { url } = await jsonOf(begun);
  idp.nextLogin = subject;
  const callback = await idp.authorize(url);
  tamper(callback);
  return callbackWith(jar, callback);
}

async function callbackWith(jar: CookieJar, callback: URL): Promise<Outcome> {
  const res = await fetch(callback, { headers: { cookie: jar.header(callback.href) }, redirect: 'manual' });
  expect(res.status).toBe(303);
  const cookie = res.headers
    .getSetCookie()
    .map((c) => c.split(';')[0])
    .find((c) => c.startsWith('gw_console=') && c.length > 'gw_console='.length);
  let session: ConsoleClient | null = null;
  if (cookie) {
    session = new ConsoleClient(gw.url);
    session.cookie = cookie;
  }
  return { location: res.headers.get('location') ?? '', session };
}

const user = (email: string, verified = true) => {
  const sub = `sub-${randomBytes(6).toString('hex')}`;
  idp.users.set(sub, { email, email_verified: verified });
  return sub;
};

async function auditOf(type: string, email: string) {
  const r = await gw.deps.db.query(
    `SELECT type, actor, details FROM audit_logs WHERE account_id = $1 AND type = $2 AND actor_email = $3 ORDER BY seq`,
    [org.accountId, type, email],
  );
  return r.rows;
}

async function loginRow(email: string) {
  const r = await gw.deps.db.query(
    'SELECT id, account_id, org_role, password_hash FROM console_users WHERE lower(email) = lower($1)',
    [email],
  );
  return r.rows[0] ?? null;
}

test("an owner's settings: the secret is never shown back, the change is audited without it", async () => {
  const got = await owner.json('GET', '/console/api/sso/settings');
  expect(got.sso).toMatchObject({
    issuer: idp.issuer,
    client_id: idp.clientId,
    client_secret_set: true,
    trusted_domains: [domain],
    default_role: 'reader',
  });
  expect(got.redirect_uri).toBe(`${gw.url}/console/api/sso/callback`);
  expect(JSON.stringify(got)).not.toContain(idp.clientSecret);
  const r = await gw.deps.db.query(
    `SELECT details, actor FROM audit_logs WHERE account_id = $1 AND type = 'organization.updated' ORDER BY seq`,
    [org.accountId],
  );
  expect(r.rows).toHaveLength(1);
  expect(r.rows[0].details).toEqual({
    id: org.accountId,
    changes_requested: {
      sso: {
        issuer: idp.issuer,
        client_id: idp.clientId,
        client_secret_changed: true,
        trusted_domains: [domain],
        default_role: 'reader',
      },
    },
  });
  expect(r.rows[0].actor.type).toBe('session');
  expect(JSON.stringify(r.rows)).not.toContain(idp.clientSecret);
});

test('a first sign-in joins the organization with its default role; the next one is the same login', async () => {
  const email = `alice@${domain}`;
  const sub = user(email);
  const first = await ssoSignIn({ email }, sub);
  expect(first.location).toBe('/console/');
  const me = await first.session!.json('GET', '/console/api/session');
  expect(me.user).toMatchObject({ email, accountId: org.accountId });
  const row = await loginRow(email);
  expect(row).toMatchObject({ account_id: org.accountId, org_role: 'reader', password_hash: null });
  const added = await auditOf('user.added', email);
  expect(added.map((e) => e.details)).toEqual([{ id: row.id, data: { role: 'reader' } }]);
  expect(await auditOf('login.succeeded', email)).toHaveLength(1);

  // Again, from another browser, started by the organization rather than the email.
  const second = await ssoSignIn({ organization: org.accountId }, sub);
  expect(second.location).toBe('/console/');
  expect((await second.session!.json('GET', '/console/api/session')).user.id).toBe(row.id);
  const logins = await gw.deps.db.query('SELECT count(*)::int AS n FROM console_users WHERE lower(email) = $1', [
    email,
  ]);
  expect(logins.rows[0].n).toBe(1);
  expect(await auditOf('login.succeeded', email)).toHaveLength(2);
  expect(await auditOf('user.added', email)).toHaveLength(1);
});

test('an email of a domain the organization does not trust is refused, and nothing is made', async () => {
  const email = `bob@elsewhere-${randomBytes(3).toString('hex')}.example`;
  const refused = await fetch(`${gw.url}/console/api/sso/start`, {
    method: 'POST',
    headers: { origin: gw.url, 'content-type': 'application/json' },
    body: JSON.stringify({ email }),
  });
  expect(refused.status).toBe(404);
  expect((await jsonOf(refused)).error.code).toBe('sso_not_configured');

  // Started by the organization, the provider vouches for an address the organization does not trust.
  const out = await ssoSignIn({ organization: org.accountId }, user(email));
  expect(out).toEqual({ location: '/console/login?sso_error=sso_email_untrusted', session: null });
  expect(await loginRow(email)).toBeNull();
  const failed = await auditOf('login.failed', email);
  expect(failed.map((e) => e.details.error_code)).toEqual(['sso_email_untrusted']);
});

test('an email the provider has not verified is refused', async () => {
  const email = `carol@${domain}`;
  const out = await ssoSignIn({ email }, user(email, false));
  expect(out).toEqual({ location: '/console/login?sso_error=sso_email_unverified', session: null });
  expect(await loginRow(email)).toBeNull();
  expect((await auditOf('login.failed', email)).map((e) => e.details.error_code)).toEqual(['sso_email_unverified']);
});

test('a callback whose state is not the one sent is refused, and the sign-in cannot be finished after it', async () => {
  const email = `dave@${domain}`;
  const sub = user(email);
  const jar = new CookieJar();
  const begun = await fetch(`${gw.url}/console/api/sso/start`, {
    method: 'POST',
    headers: { origin: gw.url, 'content-type': 'application/json' },
    body: JSON.stringify({ email }),
  });
  jar.store(gw.url, begun);
  idp.nextLogin = sub;
  const callback = await idp.authorize((await jsonOf(begun)).url);
  const forged = new URL(callback);
  forged.searchParams.set('state', 'not-the-state');
  expect(await callbackWith(jar, forged)).toEqual({
    location: '/console/login?sso_error=sso_failed',
    session: null,
  });
  // The genuine answer comes too late: the sign-in was used up by the refusal.
  expect(await callbackWith(jar, callback)).toEqual({
    location: '/console/login?sso_error=sso_expired',
    session: null,
  });
  // Without the browser's cookie, the genuine answer is refused too.
  expect(await callbackWith(new CookieJar(), callback)).toMatchObject({ session: null });
  expect(await loginRow(email)).toBeNull();
  // The refusal names the organization (the sign-in was its) but no email: the provider's answer was not read.
  expect((await auditOf('login.failed', '')).map((e) => e.details.error_code)).toEqual(['sso_failed']);
});

test('password sign-in stays without SSO and for owners; a reader of a trusted domain is sent to SSO', async () => {
  // An organization without single sign-on.
  const plain = await gw.account(0, 'no sso');
  const p = await makeLogin(gw, plain.accountId);
  expect((await new ConsoleClient(gw.url).signIn(p.email, p.password)).status).toBe(200);

  // The SSO organization's owner (its email outside the trusted domain or not, an owner keeps the password).
  const ownerInDomain = { email: `olga@${domain}`, password: `pw-${randomBytes(8).toString('hex')}` };
  await createLogin(gw.deps.db, { accountId: org.accountId, ...ownerInDomain });
  expect((await new ConsoleClient(gw.url).signIn(ownerInDomain.email, ownerInDomain.password)).status).toBe(200);

  // A reader of the trusted domain: the right password gets a pointer to SSO, a wrong one the usual 401.
  const reader = { email: `rita@${domain}`, password: `pw-${randomBytes(8).toString('hex')}` };
  const made = await createLogin(gw.deps.db, { accountId: org.accountId, ...reader });
  await gw.deps.db.query(`UPDATE console_users SET org_role = 'reader' WHERE id = $1`, [made.id]);
  const refused = await new ConsoleClient(gw.url).signIn(reader.email, reader.password);
  expect(refused.status).toBe(403);
  expect((await jsonOf(refused)).error.code).toBe('sso_required');
  expect((await new ConsoleClient(gw.url).signIn(reader.email, 'a wrong password')).status).toBe(401);
  expect((await auditOf('login.failed', reader.email)).map((e) => e.details.error_code)).toEqual([
    'sso_required',
    'invalid_credentials',
  ]);
  // Their first SSO sign-in links the provider's identity to the existing login (same id, same role).
  const out = await ssoSignIn({ email: reader.email }, user(reader.email));
  expect(out.location).toBe('/console/');
  expect((await out.session!.json('GET', '/console/api/session')).user.id).toBe(made.id);
  expect(await auditOf('user.added', reader.email)).toHaveLength(0);
});

test('settings: readers cannot change them, bad values are refused, a domain belongs to one organization', async () => {
  const other = await gw.account(0, 'other sso org');
  const otherOwnerLogin = await makeLogin(gw, other.accountId);
  const otherOwner = new ConsoleClient(gw.url);
  await otherOwner.signIn(otherOwnerLogin.email, otherOwnerLogin.password);
  const body = {
    issuer: idp.issuer,
    client_id: idp.clientId,
    client_secret: idp.clientSecret,
    trusted_domains: [domain],
    default_role: 'owner',
  };
  const taken = await otherOwner.request('PUT', '/console/api/sso/settings', body);
  expect(taken.status).toBe(409);
  expect((await jsonOf(taken)).error.code).toBe('sso_domain_taken');
  const badIssuer = await otherOwner.request('PUT', '/console/api/sso/settings', {
    ...body,
    issuer: 'http://idp.example.com',
  });
  expect(badIssuer.status).toBe(400);
  expect((await jsonOf(badIssuer)).error.param).toBe('issuer');
  const badDomain = await otherOwner.request('PUT', '/console/api/sso/settings', {
    ...body,
    trusted_domains: ['not a domain'],
  });
  expect(badDomain.status).toBe(400);
  const noSecret = await otherOwner.request('PUT', '/console/api/sso/settings', {
    ...body,
    client_secret: undefined,
    trusted_domains: [`x-${domain}`],
  });
  expect(noSecret.status).toBe(400);
  expect((await jsonOf(noSecret)).error.param).toBe('client_secret');
  expect((await otherOwner.json('GET', '/console/api/sso/settings')).sso).toBeNull();

  // The reader made by the first sign-in test changes nothing.
  const email = `erin@${domain}`;
  const readerSession = (await ssoSignIn({ email }, user(email))).session!;
  const me = await readerSession.json('GET', '/console/api/session');
  readerSession.csrf = me.csrfToken;
  expect((await readerSession.request('GET', '/console/api/sso/settings')).status).toBe(403);
  expect((await readerSession.request('DELETE', '/console/api/sso/settings')).status).toBe(403);
});

test("the organization's Admin API lists these entries in OpenAI's audit log shape", async () => {
  const admin = adminClient(gw.url, (await createAdminKey(gw.deps.db, org.accountId)).value);
  const types = ['organization.updated', 'user.added', 'login.succeeded', 'login.failed'];
  const q = types.map((t) => `event_types[]=${t}`).join('&');
  const { status, body } = await admin('GET', `/v1/organization/audit_logs?limit=100&${q}`); // checked by schema
  expect(status).toBe(200);
  const seen = new Set(body.data.map((e: { type: string }) => e.type));
  expect([...seen].sort()).toEqual([...types].sort());
  const update = body.data.find((e: { type: string }) => e.type === 'organization.updated');
  expect(update['organization.updated'].changes_requested.sso.trusted_domains).toEqual([domain]);
});
