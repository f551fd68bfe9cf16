import path from 'node:path';
import { startGateway, type TestGateway } from '../support/gateway';
import { checkAnswer } from '../support/openaiAdminSchemas';
import { withScratchDatabase } from '../support/scratchDatabase';
import { ConsoleClient, makeLogin } from '../e2e/consoleClient';
import { auditLogPage } from '../../src/organizations';
import { runAdmin, type AdminIO } from '../../src/cli/admin';
import { recordImportedVersions } from '../../src/cli/prices';
import { createPool } from '../../src/db/pool';
import { migrate } from '../../src/db/migrate';
import { projectRoot } from '../../src/projectRoot';

/**
 * Issue 48, point 7 (the console's organization pages' API) and point 4 (every audit entry in OpenAI's shape): the
 * Admin API's routes at /console/api/organizations/<id>/... for a session, with the same rules (a reader changes
 * nothing, the last owner stays, another organization is unknown; an operator opens any), and every audit answer
 * validated against OpenAI's AuditLog schema, the gateway's own changes (cache settings, prices, the catalog) too.
 */
let gw: TestGateway;
let org: { accountId: string; key: string };
let other: { accountId: string };
let owner: ConsoleClient;
let reader: ConsoleClient;
let operator: ConsoleClient;
let ownerEmail: string;

async function client(login: { email: string; password: string }): Promise<ConsoleClient> {
  const c = new ConsoleClient(gw.url);
  expect((await c.signIn(login.email, login.password)).status).toBe(200);
  return c;
}

/** A console call of an Admin API route: the answer is checked against OpenAI's schema for that route. */
async function orgCall(c: ConsoleClient, orgId: string, method: string, rest: string, body?: unknown) {
  const res = await c.request(method, `/console/api/organizations/${orgId}${rest}`, body);
  const text = await res.text();
  const json = text ? JSON.parse(text) : null;
  checkAnswer(method, `/v1/organization${rest}`, res.status, json);
  return { status: res.status, body: json };
}

beforeAll(async () => {
  gw = await startGateway({}, { temporal: false });
  const a = await gw.account(0, 'console org');
  org = { accountId: a.accountId, key: a.key };
  other = await gw.account(0, 'someone else');
  const o = await makeLogin(gw, org.accountId);
  ownerEmail = o.email;
  owner = await client(o);
  const r = await makeLogin(gw, org.accountId);
  await gw.deps.db.query(`UPDATE console_users SET org_role = 'reader' WHERE lower(email) = lower($1)`, [r.email]);
  reader = await client(r);
  const house = await gw.account(0, 'operations');
  operator = await client(await makeLogin(gw, house.accountId, 'operator'));
});
afterAll(() => gw.close());

test('an owner manages projects, limits, members and admin keys; each change is audited with the session', async () => {
  const me = await owner.json('GET', `/console/api/organizations/${org.accountId}`);
  expect(me).toMatchObject({ id: org.accountId, name: 'console org', role: 'owner' });
  const p = await orgCall(owner, org.accountId, 'POST', '/projects', { name: 'web' });
  expect(p.status).toBe(200);
  const pid = p.body.id;
  expect((await orgCall(owner, org.accountId, 'GET', '/projects')).body.data.map((x: any) => x.name)).toContain('web');
  const limit = { threshold_amount: 2_000_000, currency: 'VND', interval: 'month' };
  expect((await orgCall(owner, org.accountId, 'POST', `/projects/${pid}/spend_limit`, limit)).status).toBe(200);
  const rl = await orgCall(owner, org.accountId, 'POST', `/projects/${pid}/rate_limits/rl-gpt-4o-mini`, {
    max_requests_per_1_minute: 60,
  });
  expect(rl.body).toMatchObject({ model: 'gpt-4o-mini', max_requests_per_1_minute: 60 });
  const sa = await orgCall(owner, org.accountId, 'POST', `/projects/${pid}/service_accounts`, { name: 'bot' });
  expect(sa.body.api_key.value).toMatch(/^sk-/);
  const keys = await orgCall(owner, org.accountId, 'GET', `/projects/${pid}/api_keys`);
  expect(keys.body.data).toHaveLength(1);
  const ak = await orgCall(owner, org.accountId, 'POST', '/admin_api_keys', { name: 'ci' });
  expect(ak.body.value).toMatch(/^sk-admin-/);
  // The admin key made in the console is the owner's: it works on the Admin API.
  const res = await fetch(`${gw.url}/v1/organization/projects/${pid}`, {
    headers: { authorization: `Bearer ${ak.body.value}` },
  });
  expect(res.status).toBe(200);
  expect((await orgCall(owner, org.accountId, 'DELETE', `/admin_api_keys/${ak.body.id}`)).status).toBe(200);
  const inv = await orgCall(owner, org.accountId, 'POST', '/invites', {
    email: 'newcomer@example.com',
    role: 'reader',
  });
  expect(inv.body.accept_url).toContain('/console/invite#');
  expect((await orgCall(owner, org.accountId, 'POST', `/projects/${pid}/archive`)).body.status).toBe('archived');

  // The audit log of the organization names the owner's session (user, email, IP) for each change.
  const log = await orgCall(owner, org.accountId, 'GET', `/audit_logs?resource_ids[]=${pid}`);
  expect(log.body.data.map((e: any) => e.type)).toEqual([
    'project.archived',
    'project.updated', // the spend limit
    'project.created',
  ]);
  for (const e of log.body.data)
    expect(e.actor).toEqual({
      type: 'session',
      session: { user: { id: expect.any(String), email: ownerEmail }, ip_address: expect.any(String) },
    });
});

test('a reader reads and changes nothing; the last owner cannot leave; another organization is unknown', async () => {
  const me = await reader.json('GET', `/console/api/organizations/${org.accountId}`);
  expect(me.role).toBe('reader');
  expect((await orgCall(reader, org.accountId, 'GET', '/projects')).status).toBe(200);
  const before = (await orgCall(reader, org.accountId, 'GET', '/projects?include_archived=true')).body.data.length;
  const refused = await orgCall(reader, org.accountId, 'POST', '/projects', { name: 'nope' });
  expect([refused.status, refused.body.error.code]).toEqual([403, 'owner_role_required']);
  expect((await orgCall(reader, org.accountId, 'POST', '/admin_api_keys', { name: 'x' })).status).toBe(403);
  expect((await orgCall(reader, org.accountId, 'GET', '/projects?include_archived=true')).body.data).toHaveLength(
    before,
  );

  // The only owner cannot demote or remove themself (409 last_owner).
  const users = (await orgCall(owner, org.accountId, 'GET', '/users')).body.data;
  const me2 = users.find((u: any) => u.email === ownerEmail);
  const demote = await orgCall(owner, org.accountId, 'POST', `/users/${me2.id}`, { role: 'reader' });
  expect([demote.status, demote.body.error.code]).toEqual([409, 'last_owner']);
  expect((await orgCall(owner, org.accountId, 'DELETE', `/users/${me2.id}`)).status).toBe(409);

  // Another organization's pages are as unknown as a made-up one; the list shows only the member's own.
  expect((await orgCall(owner, other.accountId, 'GET', '/projects')).status).toBe(404);
  expect((await orgCall(owner, 'not-an-id', 'GET', '/projects')).status).toBe(404);
  const mine = await owner.json('GET', '/console/api/organizations');
  expect(mine.data.map((o: any) => o.id)).toEqual([org.accountId]);
  // A change without the session's CSRF token is refused before anything is read.
  const noCsrf = await owner.request(
    'POST',
    `/console/api/organizations/${org.accountId}/projects`,
    { name: 'x' },
    {
      'x-csrf-token': '',
    },
  );
  expect(noCsrf.status).toBe(403);
});

test('an operator opens every organization and acts in it as an owner, named by their session', async () => {
  const all = await operator.json('GET', '/console/api/organizations');
  expect(all.data.map((o: any) => o.id)).toEqual(expect.arrayContaining([org.accountId, other.accountId]));
  const me = await operator.json('GET', `/console/api/organizations/${other.accountId}`);
  expect(me).toMatchObject({ role: 'owner', name: 'someone else' });
  const p = await orgCall(operator, other.accountId, 'POST', '/projects', { name: 'by the operator' });
  expect(p.status).toBe(200);
  const log = await orgCall(operator, other.accountId, 'GET', `/audit_logs?resource_ids[]=${p.body.id}`);
  expect(log.body.data[0].actor.session.user.email).toMatch(/^operator-/);
  // The gateway's own entries (no organization) are the operators' page; a customer is refused it.
  expect((await reader.request('GET', '/console/api/admin/audit_logs')).status).toBe(403);
  const gateway = await operator.json('GET', '/console/api/admin/audit_logs?limit=5');
  checkAnswer('GET', '/v1/organization/audit_logs', 200, gateway);
});

test("cache settings changes are audited in OpenAI's shape, by key and by session", async () => {
  const patch = await fetch(`${gw.url}/v1/cache/settings`, {
    method: 'PATCH',
    headers: { authorization: `Bearer ${org.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ default_ttl_seconds: 120 }),
  });
  expect(patch.status).toBe(200);
  await owner.json('PATCH', '/console/api/cache/settings', { enabled: true });
  const log = await orgCall(owner, org.accountId, 'GET', '/audit_logs?event_types[]=organization.updated&limit=2');
  expect(log.body.data).toEqual([
    expect.objectContaining({
      actor: expect.objectContaining({ type: 'session' }),
      'organization.updated': { id: org.accountId, changes_requested: { cache: { enabled: true } } },
    }),
    expect.objectContaining({
      actor: { type: 'api_key', api_key: { id: expect.any(String), type: 'user' } },
      'organization.updated': { id: org.accountId, changes_requested: { cache: { default_ttl_seconds: 120 } } },
    }),
  ]);
});

test("an operator's price-set and catalog import are entries of no organization, in OpenAI's shape", async () => {
  await withScratchDatabase('auditshape', async (url) => {
    await migrate(url);
    const out: string[] = [];
    const io: AdminIO = {
      out: (l) => out.push(l),
      err: (l) => out.push(l),
      env: { ...process.env, DATABASE_URL: url },
    };
    const set = ['price-set', 'gpt-4o-mini', '--pricing', '{"outputPer1MTokens":99000}'];
    expect(await runAdmin([...set, '--batch-pricing', '{"outputPer1MTokens":49500}'], io)).toBe(0);
    const pool = createPool(url, 2);
    try {
      const catalog = path.join(projectRoot(), 'config', 'catalog.json');
      await recordImportedVersions(pool, catalog, ['gpt-4o'], new Date(Date.now() + 86_400_000), process.env);
      const page = await auditLogPage(pool, null, {});
      checkAnswer('GET', '/v1/organization/audit_logs', 200, page);
      expect(page.data.map((e) => Object.keys((e as any)['organization.updated'].changes_requested))).toEqual([
        ['catalog'],
        ['price'],
      ]);
      for (const e of page.data)
        expect(e.actor).toEqual({ type: 'session', session: { user: { id: expect.stringMatching(/^operator:/) } } });
    } finally {
      await pool.end();
    }
  });
});
