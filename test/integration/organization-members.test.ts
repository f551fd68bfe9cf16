import { randomUUID } from 'node:crypto';
import { startGateway, type TestGateway } from '../support/gateway';
import { startSmtp } from '../support/smtp';
import { adminClient } from '../support/openaiAdminSchemas';
import { createAdminKey } from '../../src/organizations';
import { createLogin } from '../../src/console/users';

/**
 * Issue 48, point 2: members with OpenAI's roles (owner and reader; owner and member of a project), invitations
 * (one-time, expiring, mailed over SMTP or shown as a link, accepted in the console), the last owner kept; every
 * Admin API answer checked against OpenAI's schemas.
 */
let gw: TestGateway;
let call: ReturnType<typeof adminClient>;
let other: ReturnType<typeof adminClient>;
let accountId: string;
let ownerId: string;
let project: string;

beforeAll(async () => {
  gw = await startGateway({}, { temporal: false });
  accountId = (await gw.account(0, 'members')).accountId;
  ownerId = (
    await createLogin(gw.deps.db, {
      accountId,
      email: `owner-${randomUUID()}@example.com`,
      password: 'owner password 1',
    })
  ).id;
  call = adminClient(gw.url, (await createAdminKey(gw.deps.db, accountId, { ownerUserId: ownerId })).value);
  other = adminClient(gw.url, (await createAdminKey(gw.deps.db, (await gw.account(0)).accountId)).value);
  project = (await call('POST', '/v1/organization/projects', { name: 'team' })).body.id;
});
afterAll(() => gw.close());

const accept = (base: string, token: string, password = 'a long password') =>
  fetch(`${base}/console/api/invites/accept`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ token, password }),
  });
const tokenOf = (url: string) => url.slice(url.indexOf('#') + 1);

test('an invitation without SMTP: its link, accepted once, makes a reader who changes nothing', async () => {
  const email = `reader-${randomUUID()}@example.com`;
  const inv = await call('POST', '/v1/organization/invites', {
    email,
    role: 'reader',
    projects: [{ id: project, role: 'member' }],
  });
  expect(inv.body).toMatchObject({ object: 'organization.invite', email, role: 'reader', status: 'pending' });
  expect(inv.body.accept_url).toMatch(/\/console\/invite#/);
  const first = await accept(gw.url, tokenOf(inv.body.accept_url));
  expect(first.status).toBe(200);
  const user: any = await first.json();
  expect((await accept(gw.url, tokenOf(inv.body.accept_url))).status).toBe(404);
  expect((await call('GET', `/v1/organization/invites/${inv.body.id}`)).body.status).toBe('accepted');
  expect((await call('GET', `/v1/organization/users/${user.id}`)).body).toMatchObject({ email, role: 'reader' });
  const members = await call('GET', `/v1/organization/projects/${project}/users`);
  expect(members.body.data).toEqual([expect.objectContaining({ id: user.id, role: 'member' })]);

  // A reader's admin key reads and changes nothing.
  const reader = adminClient(gw.url, (await createAdminKey(gw.deps.db, accountId, { ownerUserId: user.id })).value);
  expect((await reader('GET', '/v1/organization/projects')).status).toBe(200);
  for (const [method, path, body] of [
    ['POST', '/v1/organization/projects', { name: 'nope' }],
    ['POST', `/v1/organization/projects/${project}/archive`, undefined],
    ['DELETE', `/v1/organization/users/${ownerId}`, undefined],
    ['POST', '/v1/organization/invites', { email: 'x@example.com', role: 'owner' }],
  ] as const) {
    const r = await reader(method, path, body);
    expect([path, r.status, r.body.error.code]).toEqual([path, 403, 'owner_role_required']);
  }
});

test('an expired invitation is refused and listed as expired; a pending one can be withdrawn', async () => {
  const inv = await call('POST', '/v1/organization/invites', {
    email: `late-${randomUUID()}@example.com`,
    role: 'owner',
  });
  await gw.deps.db.query(`UPDATE invites SET expires_at = now() - interval '1 second' WHERE id = $1`, [inv.body.id]);
  expect((await accept(gw.url, tokenOf(inv.body.accept_url))).status).toBe(404);
  const list = await call('GET', '/v1/organization/invites?limit=100');
  expect(list.body.data.find((i: any) => i.id === inv.body.id).status).toBe('expired');
  const pending = await call('POST', '/v1/organization/invites', {
    email: `gone-${randomUUID()}@example.com`,
    role: 'owner',
  });
  expect((await call('DELETE', `/v1/organization/invites/${pending.body.id}`)).body.deleted).toBe(true);
  expect((await accept(gw.url, tokenOf(pending.body.accept_url))).status).toBe(404);
});

test('the last owner can be neither demoted nor removed', async () => {
  const demote = await call('POST', `/v1/organization/users/${ownerId}`, { role: 'reader' });
  expect([demote.status, demote.body.error.code]).toEqual([409, 'last_owner']);
  expect((await call('DELETE', `/v1/organization/users/${ownerId}`)).status).toBe(409);
  // With a second owner, the first may step down.
  const inv = await call('POST', '/v1/organization/invites', {
    email: `second-${randomUUID()}@example.com`,
    role: 'owner',
  });
  const second: any = await (await accept(gw.url, tokenOf(inv.body.accept_url))).json();
  expect((await call('POST', `/v1/organization/users/${ownerId}`, { role: 'reader' })).body.role).toBe('reader');
  const back = adminClient(gw.url, (await createAdminKey(gw.deps.db, accountId, { ownerUserId: second.id })).value);
  expect((await back('POST', `/v1/organization/users/${ownerId}`, { role: 'owner' })).body.role).toBe('owner');
  expect((await back('DELETE', `/v1/organization/users/${second.id}`)).body.deleted).toBe(true);
  const users = (await call('GET', '/v1/organization/users?limit=100')).body.data.map((u: any) => u.id);
  expect(users).not.toContain(second.id);
});

test('with SMTP_URL the invitation is mailed (a real SMTP server), not shown', async () => {
  const smtp = await startSmtp();
  const mails = smtp.mails;
  const mailing = await startGateway({ smtpUrl: smtp.url, mailFrom: 'gw@example.com' }, { temporal: false });
  try {
    const acc = (await mailing.account(0)).accountId;
    const mcall = adminClient(mailing.url, (await createAdminKey(mailing.deps.db, acc)).value);
    const email = `mailed-${randomUUID()}@example.com`;
    const inv = await mcall('POST', '/v1/organization/invites', { email, role: 'reader' });
    expect(inv.body.accept_url).toBeUndefined();
    expect(mails).toHaveLength(1);
    expect(mails[0]).toContain(`To: ${email}`);
    const link = /\/console\/invite#([A-Za-z0-9_-]+)/.exec(mails[0].replace(/=\r?\n/g, ''));
    expect(link).not.toBeNull();
    expect((await accept(mailing.url, link![1])).status).toBe(200);
  } finally {
    await mailing.close();
    await smtp.close();
  }
});

test("another organization's member, invite and project-user ids are 404; bad input is a 400 naming it", async () => {
  const inv = await call('POST', '/v1/organization/invites', {
    email: `iso-${randomUUID()}@example.com`,
    role: 'reader',
  });
  await call('POST', `/v1/organization/projects/${project}/users`, { user_id: ownerId, role: 'owner' });
  for (const [method, path, body] of [
    ['GET', `/v1/organization/users/${ownerId}`],
    ['POST', `/v1/organization/users/${ownerId}`, { role: 'reader' }],
    ['DELETE', `/v1/organization/users/${ownerId}`],
    ['GET', `/v1/organization/invites/${inv.body.id}`],
    ['DELETE', `/v1/organization/invites/${inv.body.id}`],
    ['GET', `/v1/organization/projects/${project}/users`],
    ['GET', `/v1/organization/projects/${project}/users/${ownerId}`],
    ['POST', `/v1/organization/projects/${project}/users/${ownerId}`, { role: 'member' }],
    ['DELETE', `/v1/organization/projects/${project}/users/${ownerId}`],
  ] as [string, string, unknown?][]) {
    const r = await other(method, path, body);
    expect([method, path, r.status]).toEqual([method, path, 404]);
  }
  for (const [body, param] of [
    [{ email: 'not an email', role: 'reader' }, 'email'],
    [{ email: `a\u0000b@example.com`, role: 'reader' }, 'email'],
    [{ email: `${'x'.repeat(300)}@example.com`, role: 'reader' }, 'email'],
    [{ email: 'a@example.com', role: 'admin' }, 'role'],
    [{ email: 'a@example.com', role: 'reader', projects: [{ id: 'proj_none', role: 'member' }] }, 'projects[0].id'],
  ] as [unknown, string][]) {
    const r = await call('POST', '/v1/organization/invites', body);
    expect([body, r.status, r.body.error.param]).toEqual([body, 400, param]);
  }
  const addStranger = await call('POST', `/v1/organization/projects/${project}/users`, {
    user_id: randomUUID(),
    role: 'member',
  });
  expect(addStranger.body.error.param).toBe('user_id');
});
