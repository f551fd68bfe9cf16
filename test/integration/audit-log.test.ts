import pg from 'pg';
import { randomUUID } from 'node:crypto';
import { startGateway, type TestGateway } from '../support/gateway';
import { adminClient } from '../support/openaiAdminSchemas';
import { withScratchDatabase } from '../support/scratchDatabase';
import { createAdminKey, recordAudit, verifyAuditChain } from '../../src/organizations';
import { createLogin } from '../../src/console/users';
import { runAdmin, type AdminIO } from '../../src/cli/admin';
import { createPool } from '../../src/db/pool';
import { migrate } from '../../src/db/migrate';

/**
 * Issue 48, point 4: the audit log on /v1/organization/audit_logs with OpenAI's filters (answers checked against
 * OpenAI's schemas), console sign-ins and refusals in it, operator price changes with their actor, and the chain
 * `npm run admin -- verify-audit` proves.
 */
let gw: TestGateway;
let call: ReturnType<typeof adminClient>;
let other: ReturnType<typeof adminClient>;
let accountId: string;
let adminKeyId: string;
const email = `audit-${randomUUID().slice(0, 8)}@example.com`;
const password = 'correct horse battery staple';

beforeAll(async () => {
  gw = await startGateway({}, { temporal: false });
  const a = await gw.account(0, 'audited');
  accountId = a.accountId;
  const k = await createAdminKey(gw.deps.db, accountId, { name: 'root' });
  adminKeyId = k.row.id;
  call = adminClient(gw.url, k.value);
  const b = await gw.account(0, 'other');
  other = adminClient(gw.url, (await createAdminKey(gw.deps.db, b.accountId)).value);
  await createLogin(gw.deps.db, { accountId, email, password });
});
afterAll(() => gw.close());

const signIn = (pw: string) =>
  fetch(`${gw.url}/console/api/session`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', origin: gw.url },
    body: JSON.stringify({ email, password: pw }),
  });

async function admin(env: NodeJS.ProcessEnv, ...argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const io: AdminIO = { out: (l) => out.push(l), err: (l) => err.push(l), env };
  const code = await runAdmin(argv, io);
  return { code, out: out.join('\n'), err: err.join('\n') };
}

test('every change, sign-in and refused sign-in is in the log with its actor; the filters select', async () => {
  const since = Math.floor(Date.now() / 1000);
  const p = (await call('POST', '/v1/organization/projects', { name: 'audited' })).body;
  const sa = (await call('POST', `/v1/organization/projects/${p.id}/service_accounts`, { name: 'bot' })).body;
  await call('DELETE', `/v1/organization/projects/${p.id}/service_accounts/${sa.id}`);
  await call('POST', `/v1/organization/projects/${p.id}/archive`);
  expect((await signIn('wrong password')).status).toBe(401);
  expect((await signIn(password)).status).toBe(200);

  const all = (await call('GET', '/v1/organization/audit_logs?limit=100')).body;
  expect(all.data.map((e: any) => e.type)).toEqual([
    'login.succeeded',
    'login.failed',
    'project.archived',
    'service_account.deleted',
    'api_key.created',
    'service_account.created',
    'project.created',
  ]);
  const byType = Object.fromEntries(all.data.map((e: any) => [e.type, e]));
  expect(byType['project.created']).toMatchObject({
    project: { id: p.id, name: 'audited' },
    actor: { type: 'api_key', api_key: { id: adminKeyId } },
    'project.created': { id: p.id, data: { name: 'audited' } },
  });
  expect(byType['login.failed']).toMatchObject({
    actor: { type: 'session', session: { user: { email }, ip_address: expect.any(String) } },
    'login.failed': { error_code: 'invalid_credentials' },
  });
  expect(byType['login.succeeded'].actor.session.user.id).toEqual(expect.any(String));

  const q = (s: string) =>
    call('GET', `/v1/organization/audit_logs?${s}`).then((r) => r.body.data.map((e: any) => e.type));
  expect(await q('event_types[]=project.created&event_types[]=project.archived')).toEqual([
    'project.archived',
    'project.created',
  ]);
  expect(await q(`project_ids[]=${p.id}`)).toHaveLength(5);
  expect(await q(`actor_ids[]=${adminKeyId}`)).toHaveLength(5);
  expect(await q(`actor_emails[]=${encodeURIComponent(email.toUpperCase())}`)).toEqual([
    'login.succeeded',
    'login.failed',
  ]);
  expect(await q(`resource_ids[]=${sa.id}`)).toEqual(['service_account.deleted', 'service_account.created']);
  expect(await q(`effective_at[gte]=${since}`)).toHaveLength(7);
  expect(await q(`effective_at[lt]=${since - 3600}`)).toEqual([]);

  // Paging: after goes to older entries, before back to newer ones.
  const page1 = (await call('GET', '/v1/organization/audit_logs?limit=3')).body;
  expect(page1.has_more).toBe(true);
  const page2 = (await call('GET', `/v1/organization/audit_logs?limit=3&after=${page1.last_id}`)).body;
  expect(page2.data.map((e: any) => e.type)).toEqual(all.data.slice(3, 6).map((e: any) => e.type));
  const back = (await call('GET', `/v1/organization/audit_logs?limit=3&before=${page2.first_id}`)).body;
  expect(back.data.map((e: any) => e.id)).toEqual(page1.data.map((e: any) => e.id));

  // Another organization sees none of it, and cannot page from its ids.
  expect((await other('GET', '/v1/organization/audit_logs')).body.data).toEqual([]);
  expect((await other('GET', `/v1/organization/audit_logs?after=${page1.last_id}`)).body.error.param).toBe('after');
});

test('bad filters are 400s naming the field', async () => {
  for (const [query, param] of [
    ['effective_at[gt]=yesterday', 'effective_at[gt]'],
    ['limit=101', 'limit'],
    ['after=audit_log-nope', 'after'],
    [`actor_emails[]=${encodeURIComponent('a\u0000b')}`, 'actor_emails[]'],
    [`project_ids[]=${'x'.repeat(400)}`, 'project_ids[]'],
  ]) {
    const r = await call('GET', `/v1/organization/audit_logs?${query}`);
    expect([query, r.status, r.body.error.param]).toEqual([query, 400, param]);
  }
});

test('the log is append-only; concurrent appends keep one chain', async () => {
  await Promise.all(
    Array.from({ length: 20 }, (_, i) =>
      recordAudit(gw.deps.db, { accountId, type: 'project.updated', actor: null, details: { i } }),
    ),
  );
  expect(await verifyAuditChain(gw.deps.db)).toMatchObject({ ok: true, firstBroken: null });
  await expect(gw.deps.db.query(`UPDATE audit_logs SET type = 'x' WHERE account_id = $1`, [accountId])).rejects.toThrow(
    /append-only/,
  );
  await expect(gw.deps.db.query('DELETE FROM audit_logs WHERE account_id = $1', [accountId])).rejects.toThrow(
    /append-only/,
  );
});

test('an operator price change is logged with its actor; verify-audit names the first broken entry', async () => {
  await withScratchDatabase('audit', async (url) => {
    await migrate(url);
    const env = { ...process.env, DATABASE_URL: url };
    // A list price with a batch price changes with it (docs/billing.md, "Price versions").
    const set = await admin(
      env,
      'price-set',
      'gpt-4o-mini',
      '--pricing',
      '{"outputPer1MTokens":99000}',
      '--batch-pricing',
      '{"outputPer1MTokens":49500}',
    );
    expect(set.code).toBe(0);
    const db = new pg.Client({ connectionString: url });
    await db.connect();
    try {
      const e = (await db.query(`SELECT account_id, type, actor, details FROM audit_logs`)).rows;
      expect(e).toEqual([
        {
          account_id: null,
          type: 'organization.updated',
          actor: { type: 'session', session: { user: { id: expect.stringMatching(/^operator:.+@.+/) } } },
          details: {
            changes_requested: {
              price: expect.objectContaining({
                model: 'gpt-4o-mini',
                pricing: expect.objectContaining({ outputPer1MTokens: 99000 }),
              }),
            },
          },
        },
      ]);
      const pool = createPool(url, 2);
      for (let i = 0; i < 3; i++)
        await recordAudit(pool, { accountId: null, type: 'test', actor: null, details: { i } });
      await pool.end();
      // The operator makes an organization's first admin key (recorded too), which the Admin API then takes.
      const acc = (await db.query(`INSERT INTO accounts (name) VALUES ('cli') RETURNING id`)).rows[0].id;
      const made = await admin(env, 'create-admin-key', acc, '--name', 'first', '--json');
      expect(made.code).toBe(0);
      expect(JSON.parse(made.out).key).toMatch(/^sk-admin-/);
      const ok = await admin(env, 'verify-audit');
      expect(ok).toMatchObject({ code: 0 });
      expect(ok.out).toMatch(/audit chain ok: 5 entries/);

      // Someone with the database's owner rights edits an entry behind the triggers' back: the chain shows where.
      await db.query('ALTER TABLE audit_logs DISABLE TRIGGER audit_logs_no_update_delete');
      const third = (await db.query('SELECT seq, id FROM audit_logs ORDER BY seq OFFSET 2 LIMIT 1')).rows[0];
      await db.query(`UPDATE audit_logs SET details = '{"i": 99}' WHERE seq = $1`, [third.seq]);
      const broken = await admin(env, 'verify-audit');
      expect(broken.code).toBe(1);
      expect(broken.out).toContain(`BROKEN audit chain at entry ${third.seq} (${third.id})`);
      // An entry removed: the next one's link no longer holds.
      await db.query(`UPDATE audit_logs SET details = '{"i": 1}' WHERE seq = $1`, [third.seq]);
      expect((await admin(env, 'verify-audit')).code).toBe(0);
      await db.query('DELETE FROM audit_logs WHERE seq = $1', [third.seq]);
      const gap = await admin(env, 'verify-audit', '--json');
      expect(JSON.parse(gap.out).firstBroken).toMatchObject({ reason: expect.stringMatching(/prev_hash/) });
    } finally {
      await db.end();
    }
  });
});
