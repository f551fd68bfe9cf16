import type Router from '@koa/router';
import type { AppDeps } from '../operations';
import { jsonBody, route, type GatewayState } from '../api/middleware';
import { badRequest } from '../errors';
import { ORDER_ID, topupService } from '../jobs/topups';
import { requireCsrf, requireOperator, requireSession, sameOrigin, sessionOf } from './auth';
import { intParam, stringField, uuidParam } from './params';

/**
 * Top-ups in the console (docs/payments.md), through the same service as /v1/topups. The customer's page: create
 * an order (its QR and bank details), follow it until paid, the history. The operators': the queue of transfers
 * that matched no order, each assigned to an account or returned, with a reason, recorded with the operator's login.
 */
export function mountTopupsApi(r: Router<GatewayState>, deps: AppDeps): void {
  const customer = [sameOrigin(deps), requireSession(deps), requireCsrf()];
  const operator = [...customer, requireOperator()];
  const body = jsonBody(16 * 1024);
  const topups = topupService(deps);

  r.post('/console/api/topups', route('/console/api/topups'), ...customer, body, async (ctx) => {
    ctx.body = await topups.create(sessionOf(ctx).accountId, ctx.request.body, ctx.ip);
    ctx.status = 201;
  });
  r.get('/console/api/topups', route('/console/api/topups'), ...customer, async (ctx) => {
    const after = ctx.query.after;
    if (after !== undefined && (typeof after !== 'string' || !ORDER_ID.test(after)))
      throw badRequest('after must be the id of a top-up', 'after');
    const limit = intParam(ctx.query.limit, 'limit', 20, 1, 100);
    ctx.body = await topups.list(sessionOf(ctx).accountId, { limit, after, order: 'desc' });
  });
  r.get('/console/api/topups/:id', route('/console/api/topups/:id'), ...customer, async (ctx) => {
    ctx.body = await topups.get(sessionOf(ctx).accountId, ctx.params.id);
  });

  r.get('/console/api/balance_alert', route('/console/api/balance_alert'), ...customer, async (ctx) => {
    ctx.body = await topups.alert(sessionOf(ctx).accountId);
  });
  r.put('/console/api/balance_alert', route('/console/api/balance_alert'), ...customer, body, async (ctx) => {
    ctx.body = await topups.setAlert(sessionOf(ctx).accountId, ctx.request.body);
  });

  r.get(
    '/console/api/admin/topups/statements',
    route('/console/api/admin/topups/statements'),
    ...operator,
    async (ctx) => {
      ctx.body = await topups.statements(intParam(ctx.query.limit, 'limit', 60, 1, 366));
    },
  );
  r.get(
    '/console/api/admin/topups/unmatched',
    route('/console/api/admin/topups/unmatched'),
    ...operator,
    async (ctx) => {
      ctx.body = await topups.unmatched(intParam(ctx.query.limit, 'limit', 100, 1, 1000));
    },
  );
  r.post(
    '/console/api/admin/topups/transfers/:id/assign',
    route('/console/api/admin/topups/transfers/:id/assign'),
    ...operator,
    body,
    async (ctx) => {
      const b = (ctx.request.body ?? {}) as Record<string, unknown>;
      const accountId = uuidParam(b.accountId, 'accountId');
      const reason = stringField(b, 'reason', { min: 1, max: 500 });
      ctx.body = await topups.resolve(ctx.params.id, {
        action: 'assign',
        accountId,
        actor: `console:${sessionOf(ctx).email}`,
        reason,
      });
    },
  );
  r.post(
    '/console/api/admin/topups/transfers/:id/return',
    route('/console/api/admin/topups/transfers/:id/return'),
    ...operator,
    body,
    async (ctx) => {
      const reason = stringField((ctx.request.body ?? {}) as Record<string, unknown>, 'reason', { min: 1, max: 500 });
      ctx.body = await topups.resolve(ctx.params.id, {
        action: 'return',
        actor: `console:${sessionOf(ctx).email}`,
        reason,
      });
    },
  );
}
