import pg from 'pg';
import fs from 'node:fs';
import path from 'node:path';
import OpenAI from 'openai';
import { startGateway, type TestGateway } from '../support/gateway';
import { adminClient, checkingFetch } from '../support/openaiAdminSchemas';
import { createAdminKey } from '../../src/organizations';
import { createApiKey } from '../../src/auth/apiKeys';
import { migrate, migrationsDir } from '../../src/db/migrate';
import { withScratchDatabase } from '../support/scratchDatabase';

/**
 * Issue 48, point 1: an account is an organization with projects, service accounts and admin keys, on OpenAI's
 * Admin API. Every JSON answer is checked against OpenAI's published schemas (adminClient, checkingFetch).
 */
let gw: TestGateway;
type Org = Awaited<ReturnType<TestGateway['account']>> & { admin: string; call: ReturnType<typeof adminClient> };
let a: Org;
let b: Org;

async function org(): Promise<Org> {
  const acc = await gw.account(1_000_000, 'org');
  const admin = (await createAdminKey(gw.deps.db, acc.accountId, { name: 'root' })).value;
  return { ...acc, admin, call: adminClient(gw.url, admin) };
}

beforeAll(async () => {
  gw = await startGateway({}, { temporal: false });
  a = await org();
  b = await org();
});
afterAll(() => gw.close());

const chat = (key: string) =>
  fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }),
  });

/** Polls until a key's answer on a model route is `status` (a key change reaches the key cache within its ttl). */
async function untilStatus(key: string, status: number): Promise<void> {
  for (let i = 0; ; i++) {
    const r = await chat(key);
    await r.arrayBuffer();
    if (r.status === status) return;
    if (i > 200) throw new Error(`still ${r.status}, not ${status}`);
    await new Promise((res) => setTimeout(res, 50));
  }
}

test('the migration puts every existing key, revoked ones too, in its account default project', async () => {
  await withScratchDatabase('orgs', async (url) => {
    const db = new pg.Client({ connectionString: url });
    await db.connect();
    try {
      // The schema as it was before organizations, with two accounts' keys in it.
      await db.query('CREATE TABLE schema_migrations (version text PRIMARY KEY, applied_at timestamptz DEFAULT now())');
      for (const f of fs
        .readdirSync(migrationsDir())
        .filter((f) => /^\d+_.*\.sql$/.test(f))
        .sort()) {
        if (f >= '210') break;
        await db.query(fs.readFileSync(path.join(migrationsDir(), f), 'utf8'));
        await db.query('INSERT INTO schema_migrations (version) VALUES ($1)', [f]);
      }
      const accounts = (await db.query(`INSERT INTO accounts (name) VALUES ('x'), ('y') RETURNING id`)).rows.map(
        (r) => r.id as string,
      );
      for (const [i, acc] of accounts.entries())
        for (let k = 0; k < 3; k++)
          await db.query(
            `INSERT INTO api_keys (account_id, name, prefix, key_hash, revoked_at) VALUES ($1, $2, 'sk-gw-x', $3, $4)`,
            [acc, `k${k}`, Buffer.from(`${i}-${k}`), k === 2 ? new Date() : null],
          );
      const before = (await db.query('SELECT id, account_id, name, revoked_at FROM api_keys ORDER BY id')).rows;

      await migrate(url);

      const projects = (await db.query('SELECT id, account_id, is_default FROM projects')).rows;
      expect(projects.map((p) => p.account_id).sort()).toEqual([...accounts].sort());
      expect(projects.every((p) => p.is_default)).toBe(true);
      const after = (await db.query('SELECT id, account_id, name, revoked_at, project_id FROM api_keys ORDER BY id'))
        .rows;
      expect(after.map(({ project_id: _, ...k }) => k)).toEqual(before);
      for (const k of after) expect(k.project_id).toBe(projects.find((p) => p.account_id === k.account_id)!.id);
      // An account made afterwards has its default project, and a key made without a project lands in it.
      const c = (await db.query(`INSERT INTO accounts (name) VALUES ('z') RETURNING id`)).rows[0].id;
      const k = await db.query(
        `INSERT INTO api_keys (account_id, prefix, key_hash) VALUES ($1, 'sk-gw-x', '\\x01') RETURNING project_id`,
        [c],
      );
      const d = await db.query('SELECT id FROM projects WHERE account_id = $1 AND is_default', [c]);
      expect(k.rows[0].project_id).toBe(d.rows[0].id);
    } finally {
      await db.end();
    }
  });
});

test('projects: create, list with after/has_more, retrieve, modify, archive (the official SDK)', async () => {
  const sdk = new OpenAI({ adminAPIKey: a.admin, baseURL: `${gw.url}/v1`, maxRetries: 0, fetch: checkingFetch });
  const made = [];
  for (const name of ['alpha', 'beta', 'gamma']) made.push(await sdk.admin.organization.projects.create({ name }));
  expect(made[0]).toMatchObject({ object: 'organization.project', name: 'alpha', status: 'active', archived_at: null });

  const first = await a.call('GET', '/v1/organization/projects?limit=2');
  expect(first.body.data.map((p: any) => p.name)).toEqual(['Default project', 'alpha']);
  expect(first.body.has_more).toBe(true);
  const rest = await a.call('GET', `/v1/organization/projects?limit=2&after=${first.body.last_id}`);
  expect(rest.body.data.map((p: any) => p.name)).toEqual(['beta', 'gamma']);
  expect(rest.body.has_more).toBe(false);
  const all = [];
  for await (const p of sdk.admin.organization.projects.list({ limit: 1 })) all.push(p.name);
  expect(all).toEqual(['Default project', 'alpha', 'beta', 'gamma']);

  expect(await sdk.admin.organization.projects.retrieve(made[1].id)).toMatchObject({ id: made[1].id, name: 'beta' });
  const renamed = await sdk.admin.organization.projects.update(made[1].id, { name: 'beta 2' });
  expect(renamed.name).toBe('beta 2');
  const archived = await sdk.admin.organization.projects.archive(made[2].id);
  expect(archived).toMatchObject({ status: 'archived' });
  expect(archived.archived_at).toEqual(expect.any(Number));
  const live = await a.call('GET', '/v1/organization/projects');
  expect(live.body.data.map((p: any) => p.name)).not.toContain('gamma');
  const withArchived = await a.call('GET', '/v1/organization/projects?include_archived=true');
  expect(withArchived.body.data.map((p: any) => p.name)).toContain('gamma');
  // An archived project changes no more; the default project is never archived.
  const again = await a.call('POST', `/v1/organization/projects/${made[2].id}`, { name: 'back' });
  expect(again.status).toBe(400);
  const def = first.body.data[0].id;
  const noArchive = await a.call('POST', `/v1/organization/projects/${def}/archive`);
  expect(noArchive.status).toBe(400);
});

test('an admin key calls no model route and a project key no /v1/organization/* route: 403', async () => {
  const client = new OpenAI({ apiKey: a.admin, baseURL: `${gw.url}/v1`, maxRetries: 0 });
  const err = await client.chat.completions
    .create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })
    .catch((e) => e);
  expect(err).toBeInstanceOf(OpenAI.PermissionDeniedError);
  expect(err.error).toMatchObject({ type: 'invalid_request_error', code: 'project_key_required' });
  const models = await fetch(`${gw.url}/v1/models`, { headers: { authorization: `Bearer ${a.admin}` } });
  expect(models.status).toBe(403);
  await models.arrayBuffer();

  const asProject = await a.call('GET', '/v1/organization/projects', undefined, { key: a.key });
  expect(asProject.status).toBe(403);
  expect(asProject.body.error.code).toBe('admin_key_required');
  expect((await a.call('GET', '/v1/organization/projects', undefined, { key: 'sk-admin-madeup' })).status).toBe(401);
  expect((await a.call('GET', '/v1/organization/projects', undefined, { key: '' })).status).toBe(401);
  expect((await chat(a.key)).status).toBe(200);
});

test('a project key belongs to its project: listed, retrieved, deleted (then refused)', async () => {
  const projects = await a.call('GET', '/v1/organization/projects');
  const def = projects.body.data[0].id;
  const extra = await createApiKey(gw.deps.db, a.accountId, 'extra');
  const list = await a.call('GET', `/v1/organization/projects/${def}/api_keys`);
  expect(list.body.data.map((k: any) => k.id)).toEqual(expect.arrayContaining([a.keyId, extra.id]));
  const one = await a.call('GET', `/v1/organization/projects/${def}/api_keys/${extra.id}`);
  expect(one.body).toMatchObject({ object: 'organization.project.api_key', id: extra.id, name: 'extra' });
  expect(one.body.redacted_value).toBe(`${extra.prefix}...`);
  await untilStatus(extra.key, 200);
  const del = await a.call('DELETE', `/v1/organization/projects/${def}/api_keys/${extra.id}`);
  expect(del.body).toEqual({ object: 'organization.project.api_key.deleted', id: extra.id, deleted: true });
  await untilStatus(extra.key, 401);
  expect((await a.call('GET', `/v1/organization/projects/${def}/api_keys/${extra.id}`)).status).toBe(404);
});

test('service accounts: made with their key, which calls models until the account or its project goes', async () => {
  const p = (await a.call('POST', '/v1/organization/projects', { name: 'bots' })).body;
  const made = await a.call('POST', `/v1/organization/projects/${p.id}/service_accounts`, { name: 'ci' });
  expect(made.body).toMatchObject({ object: 'organization.project.service_account', name: 'ci', role: 'member' });
  const key = made.body.api_key.value as string;
  await untilStatus(key, 200);
  const keys = await a.call('GET', `/v1/organization/projects/${p.id}/api_keys`);
  expect(keys.body.data).toHaveLength(1);
  expect(keys.body.data[0].owner).toMatchObject({ type: 'service_account', service_account: { id: made.body.id } });
  const list = await a.call('GET', `/v1/organization/projects/${p.id}/service_accounts`);
  expect(list.body.data.map((s: any) => s.id)).toEqual([made.body.id]);
  expect((await a.call('GET', `/v1/organization/projects/${p.id}/service_accounts/${made.body.id}`)).status).toBe(200);
  const del = await a.call('DELETE', `/v1/organization/projects/${p.id}/service_accounts/${made.body.id}`);
  expect(del.body).toEqual({ object: 'organization.project.service_account.deleted', id: made.body.id, deleted: true });
  await untilStatus(key, 401);

  // A key of an archived project stops working.
  const other = await a.call('POST', `/v1/organization/projects/${p.id}/service_accounts`, { name: 'ci2' });
  await untilStatus(other.body.api_key.value, 200);
  await a.call('POST', `/v1/organization/projects/${p.id}/archive`);
  await untilStatus(other.body.api_key.value, 401);
});

test('admin keys: create, list, retrieve, delete; a deleted admin key is refused', async () => {
  const made = await a.call('POST', '/v1/organization/admin_api_keys', { name: 'automation' });
  expect(made.body).toMatchObject({ object: 'organization.admin_api_key', name: 'automation' });
  expect(made.body.value).toMatch(/^sk-admin-/);
  const list = await a.call('GET', '/v1/organization/admin_api_keys?limit=1');
  expect(list.body.has_more).toBe(true);
  const next = await a.call('GET', `/v1/organization/admin_api_keys?after=${list.body.last_id}`);
  expect(next.body.data.map((k: any) => k.id)).toContain(made.body.id);
  expect((await a.call('GET', `/v1/organization/admin_api_keys/${made.body.id}`)).body.id).toBe(made.body.id);
  expect((await a.call('GET', '/v1/organization/projects', undefined, { key: made.body.value })).status).toBe(200);
  const del = await a.call('DELETE', `/v1/organization/admin_api_keys/${made.body.id}`);
  expect(del.body).toEqual({ object: 'organization.admin_api_key.deleted', id: made.body.id, deleted: true });
  for (let i = 0; ; i++) {
    const r = await a.call('GET', '/v1/organization/projects', undefined, { key: made.body.value });
    if (r.status === 401) break;
    if (i > 200) throw new Error('the deleted admin key still works');
    await new Promise((res) => setTimeout(res, 50));
  }
});

test("another organization's ids are 404 on every route", async () => {
  const p = (await a.call('POST', '/v1/organization/projects', { name: 'private' })).body;
  const sa = (await a.call('POST', `/v1/organization/projects/${p.id}/service_accounts`, { name: 's' })).body;
  const keyId = sa.api_key.id;
  const adminKey = (await a.call('POST', '/v1/organization/admin_api_keys', { name: 'x' })).body.id;
  const P = `/v1/organization/projects/${p.id}`;
  const routes: [string, string, unknown?][] = [
    ['GET', P],
    ['POST', P, { name: 'mine now' }],
    ['POST', `${P}/archive`],
    ['GET', `${P}/api_keys`],
    ['GET', `${P}/api_keys/${keyId}`],
    ['DELETE', `${P}/api_keys/${keyId}`],
    ['GET', `${P}/service_accounts`],
    ['POST', `${P}/service_accounts`, { name: 'spy' }],
    ['GET', `${P}/service_accounts/${sa.id}`],
    ['DELETE', `${P}/service_accounts/${sa.id}`],
    ['GET', `/v1/organization/admin_api_keys/${adminKey}`],
    ['DELETE', `/v1/organization/admin_api_keys/${adminKey}`],
  ];
  for (const [method, url, body] of routes) {
    const r = await b.call(method, url, body);
    expect([method, url, r.status]).toEqual([method, url, 404]);
  }
  // Nothing changed: A still sees all of it as it was.
  expect((await a.call('GET', P)).body).toMatchObject({ name: 'private', status: 'active' });
  expect((await a.call('GET', `${P}/api_keys/${keyId}`)).status).toBe(200);
  expect((await a.call('GET', `/v1/organization/admin_api_keys/${adminKey}`)).status).toBe(200);
  // B's cursor into A's list is no cursor of B's.
  expect((await b.call('GET', `/v1/organization/projects?after=${p.id}`)).body.error.param).toBe('after');
});

test('hostile names, limits and cursors are 400s naming the field, and change nothing', async () => {
  const before = (await a.call('GET', '/v1/organization/projects?include_archived=true&limit=100')).body.data.length;
  const bad: [string, string, unknown, string][] = [
    ['POST', '/v1/organization/projects', { name: 'x'.repeat(201) }, 'name'],
    ['POST', '/v1/organization/projects', { name: 'evil\u0000name' }, 'name'],
    ['POST', '/v1/organization/projects', { name: '' }, 'name'],
    ['POST', '/v1/organization/projects', { name: 42 }, 'name'],
    ['POST', '/v1/organization/projects', {}, 'name'],
    ['POST', '/v1/organization/projects', { name: 'ok', owner: 'me' }, 'owner'],
    ['POST', '/v1/organization/admin_api_keys', { name: 'k', expires_in_seconds: -1 }, 'expires_in_seconds'],
    ['GET', '/v1/organization/projects?limit=0', undefined, 'limit'],
    ['GET', '/v1/organization/projects?limit=1e9', undefined, 'limit'],
    ['GET', '/v1/organization/projects?after=%27%3B%20DROP%20TABLE', undefined, 'after'],
    ['GET', '/v1/organization/projects?after=proj_nope', undefined, 'after'],
    ['GET', '/v1/organization/projects?include_archived=maybe', undefined, 'include_archived'],
    ['GET', '/v1/organization/admin_api_keys?order=sideways', undefined, 'order'],
  ];
  for (const [method, url, body, param] of bad) {
    const r = await a.call(method, url, body);
    expect([url, body, r.status, r.body.error.param]).toEqual([url, body, 400, param]);
  }
  const malformed = await a.call('POST', '/v1/organization/projects', '{"name":');
  expect(malformed.status).toBe(400);
  const after = (await a.call('GET', '/v1/organization/projects?include_archived=true&limit=100')).body.data.length;
  expect(after).toBe(before);
});
