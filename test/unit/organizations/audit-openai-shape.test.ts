import { auditLogObject } from '../../../src/organizations/auditRoutes';
import { cliActor, systemActor } from '../../../src/db/auditLog';
import { checkAnswer } from '../../support/openaiAdminSchemas';

/** Every audit entry reads in OpenAI's AuditLog shape, those written before it too (docs/organizations.md). */
const row = (type: string, actor: unknown, details: Record<string, unknown>, account_id: string | null = 'acc') => ({
  seq: 1,
  id: 'audit_log-1',
  type,
  effective_at: new Date('2026-01-01T00:00:00Z'),
  project: null,
  actor,
  details,
  account_id,
});
const page = (data: unknown[]) => ({ object: 'list', data, first_id: 'x', last_id: 'x', has_more: false });

test("the gateway's actors are OpenAI's: a CLI operator a session, a payment provider a service-account key", () => {
  expect(cliActor('ops', 'host1')).toEqual({ type: 'session', session: { user: { id: 'operator:ops@host1' } } });
  expect(systemActor('casso')).toEqual({
    type: 'api_key',
    api_key: { id: 'system:casso', type: 'service_account', service_account: { id: 'system:casso' } },
  });
  const entries = [
    row('organization.updated', cliActor('ops', 'h'), { changes_requested: { price: { model: 'm' } } }, null),
    row('organization.updated', systemActor('sepay'), { id: 'acc', changes_requested: { topup: { amount: 1 } } }),
  ].map(auditLogObject);
  expect(() => checkAnswer('GET', '/v1/organization/audit_logs', 200, page(entries))).not.toThrow();
});

test("entries written before read as OpenAI's: topup.*, price.updated, catalog.imported; operator and system", () => {
  const old = [
    row('topup.succeeded', { type: 'system', system: { service: 'vnpay' } }, { id: 'ord', amount: 5 }),
    row(
      'topup.transfer_assigned',
      { type: 'operator', operator: { user: 'u', host: 'h', via: 'cli' } },
      { id: '7', reason: 'r' },
    ),
    row('price.updated', { type: 'operator', operator: { user: 'u', host: 'h', via: 'cli' } }, { model: 'm' }, null),
    row('catalog.imported', null, { catalog: 'c.json' }, null),
  ].map(auditLogObject);
  expect(() => checkAnswer('GET', '/v1/organization/audit_logs', 200, page(old))).not.toThrow();
  expect(old.map((e) => e.type)).toEqual(Array(4).fill('organization.updated'));
  expect(old[0]).toMatchObject({
    actor: { type: 'api_key', api_key: { id: 'system:vnpay', type: 'service_account' } },
    'organization.updated': { id: 'acc', changes_requested: { topup: { event: 'succeeded', id: 'ord', amount: 5 } } },
  });
  expect(old[1].actor).toEqual({ type: 'session', session: { user: { id: 'operator:u@h' } } });
  expect((old[2] as Record<string, unknown>)['organization.updated']).toEqual({
    changes_requested: { price: { model: 'm' } },
  });
  // A type of OpenAI's own is as written.
  const same = auditLogObject(row('project.created', null, { id: 'p' }));
  expect(same).toMatchObject({ type: 'project.created', 'project.created': { id: 'p' } });
});
