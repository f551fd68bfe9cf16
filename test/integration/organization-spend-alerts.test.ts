import { randomUUID } from 'node:crypto';
import { startGateway, type TestGateway } from '../support/gateway';
import { startSmtp } from '../support/smtp';
import { adminClient } from '../support/openaiAdminSchemas';
import { fastWebhookSettings } from '../support/webhookReceiver';
import { createAdminKey, mailSpendAlerts, smtpMailer, sweepSpendAlerts } from '../../src/organizations';
import { createLogin } from '../../src/console/users';

/**
 * Issue 48, point 3: spend alerts of an organization and of a project (OpenAI's /spend_alerts, in VND): a crossing
 * emits `spend.alert` (the signed webhook job kind) and smtp.mails the owners, once per crossing. Answers are checked
 * against OpenAI's schemas (the currency aside: VND here).
 */
let gw: TestGateway;
let call: ReturnType<typeof adminClient>;
let other: ReturnType<typeof adminClient>;
let accountId: string;
let apiKey: string;
let project: string;
let saKey: string;
let ownerEmail: string;
let smtp: Awaited<ReturnType<typeof startSmtp>>;

beforeAll(async () => {
  smtp = await startSmtp();
  gw = await startGateway({ webhooks: fastWebhookSettings() }, { temporal: false });
  const acc = await gw.account(10_000_000, 'alerts');
  accountId = acc.accountId;
  apiKey = acc.key;
  ownerEmail = `owner-${randomUUID()}@example.com`;
  await createLogin(gw.deps.db, { accountId, email: ownerEmail, password: 'owner password 1' });
  call = adminClient(gw.url, (await createAdminKey(gw.deps.db, accountId)).value);
  other = adminClient(gw.url, (await createAdminKey(gw.deps.db, (await gw.account(0)).accountId)).value);
  project = (await call('POST', '/v1/organization/projects', { name: 'alerted' })).body.id;
  saKey = (await call('POST', `/v1/organization/projects/${project}/service_accounts`, { name: 'bot' })).body.api_key
    .value;
});
afterAll(async () => {
  await gw.close();
  await smtp.close();
});

const body = (threshold: number, recipients: string[] = []) => ({
  threshold_amount: threshold,
  currency: 'VND',
  interval: 'month',
  notification_channel: { type: 'email', recipients, subject_prefix: 'Gateway alert' },
});

async function chat(key: string): Promise<number> {
  const r = await fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], max_tokens: 20 }),
  });
  await r.text();
  return r.status;
}

async function alertEvents(): Promise<any[]> {
  const r = await gw.deps.db.query(
    `SELECT payload FROM webhook_events WHERE account_id = $1 AND type = 'spend.alert' ORDER BY created_at`,
    [accountId],
  );
  return r.rows.map((x) => (typeof x.payload === 'string' ? JSON.parse(x.payload) : x.payload));
}

test('a crossed alert emits spend.alert and smtp.mails the owners once per crossing, not the other level', async () => {
  const ep = await fetch(`${gw.url}/v1/webhooks`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ url: 'http://127.0.0.1:9/hook', events: ['spend.alert'] }),
  });
  expect(ep.status).toBe(201);
  const projAlert = await call(
    'POST',
    `/v1/organization/projects/${project}/spend_alerts`,
    body(1, ['fin@example.com']),
  );
  expect(projAlert.body).toMatchObject({ object: 'project.spend_alert', threshold_amount: 1, currency: 'VND' });
  const orgAlert = await call('POST', '/v1/organization/spend_alerts', body(1_000_000_000));
  expect(orgAlert.body.object).toBe('organization.spend_alert');

  // Sweeps and mails are scoped to this test's organization: other test files share the database, and the workers of
  // some sweep every alert on their own, so the outcome is read from the events recorded, whoever swept.
  const mine = { accountId };
  // Nothing spent yet: nothing fires.
  expect(await sweepSpendAlerts(gw.deps.db, mine)).toEqual([]);
  expect(await alertEvents()).toEqual([]);
  expect(await chat(saKey)).toBe(200);
  await gw.deps.credit.flush();

  await sweepSpendAlerts(gw.deps.db, mine);
  const events = await alertEvents();
  expect(events).toHaveLength(1);
  expect(JSON.stringify(events[0])).toContain(projAlert.body.id);
  // One delivery, to the one subscribed endpoint.
  const deliveries = await gw.deps.db.query(
    `SELECT d.endpoint_id FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id
     WHERE e.account_id = $1 AND e.type = 'spend.alert'`,
    [accountId],
  );
  expect(deliveries.rows).toHaveLength(1);
  // Once per crossing: more spend in the same month fires nothing more.
  expect(await chat(saKey)).toBe(200);
  await gw.deps.credit.flush();
  expect(await sweepSpendAlerts(gw.deps.db, mine)).toEqual([]);
  expect(await alertEvents()).toHaveLength(1);

  const mailer = smtpMailer(smtp.url, 'gw@example.com');
  expect(await mailSpendAlerts(gw.deps.db, mailer, mine)).toBe(1);
  expect(await mailSpendAlerts(gw.deps.db, mailer, mine)).toBe(0);
  expect(smtp.mails).toHaveLength(1);
  expect(smtp.mails[0]).toContain(ownerEmail);
  expect(smtp.mails[0]).toContain('fin@example.com');
  expect(smtp.mails[0]).toContain('Subject: Gateway alert: project alerted');

  // A changed threshold is armed again: lowered to 1 VND, the organization's alert fires now.
  const lowered = await call('POST', `/v1/organization/spend_alerts/${orgAlert.body.id}`, body(1));
  expect(lowered.body.threshold_amount).toBe(1);
  await sweepSpendAlerts(gw.deps.db, mine);
  expect(await alertEvents()).toHaveLength(2);
  expect(await mailSpendAlerts(gw.deps.db, mailer, mine)).toBe(1);
});

test('alerts list, retrieve and delete per level; other organizations see none; bad bodies are 400s', async () => {
  const list = await call('GET', '/v1/organization/spend_alerts');
  expect(list.body.data).toHaveLength(1);
  const id = list.body.data[0].id;
  expect((await call('GET', `/v1/organization/spend_alerts/${id}`)).body.id).toBe(id);
  expect((await call('GET', `/v1/organization/projects/${project}/spend_alerts/${id}`)).status).toBe(404);
  expect((await other('GET', `/v1/organization/spend_alerts/${id}`)).status).toBe(404);
  for (const [b, param] of [
    [{ ...body(5), currency: 'USD' }, 'currency'],
    [body(-1), 'threshold_amount'],
    [body(5, ['not an email']), 'notification_channel.recipients[0]'],
    [{ ...body(5), interval: 'day' }, 'interval'],
  ] as const) {
    const r = await call('POST', '/v1/organization/spend_alerts', b);
    expect([r.status, r.body.error.param]).toEqual([400, param]);
  }
  expect((await call('GET', '/v1/organization/spend_alerts?order=sideways')).status).toBe(400);
  expect((await call('DELETE', `/v1/organization/spend_alerts/${id}`)).body).toEqual({
    id,
    object: 'organization.spend_alert.deleted',
    deleted: true,
  });
  expect((await call('GET', '/v1/organization/spend_alerts')).body.data).toEqual([]);
  // Each change is in the audit log (checked against OpenAI's AuditLog schema by the client).
  const audit = await call('GET', '/v1/organization/audit_logs?event_types[]=organization.updated&limit=100');
  expect(audit.body.data.map((e: any) => Object.keys(e['organization.updated'].changes_requested.spend_alert))).toEqual(
    [
      ['id', 'deleted'],
      ['id', 'updated'],
      ['id', 'created'],
    ],
  );
});
