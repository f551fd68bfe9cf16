import type Router from '@koa/router';
import type { AppDeps } from '../operations';
import { jsonBody, route, type GatewayState } from '../api/middleware';
import { ApiError, badRequest, notFound } from '../errors';
import { createAccount, topUp } from '../billing';
import { requireCsrf, requireOperator, requireSession, sameOrigin, sessionOf } from './auth';
import { accountShortfalls, balanceWithLedger, getAccount, listAccounts } from './queries';
import { intParam, requiredString, stringField, uuidParam } from './params';
import { listJobs } from './jobs';
import { jobStatusParam } from './customerApi';
import { ConsoleUserError, createLogin, listLogins } from './users';
import { parseLimitsPatch, setAccountLimits, setKeyLimits, untilBudgetBinds } from '../limits';
import { keysWithControls } from './keyControls';
import { redactorFor } from '../catalog';

const MAX_TOP_UP_VND = 1_000_000_000_000; // 1.000 tỷ ₫: a typo guard, far above any real top-up

/** The Temporal UI page of a job's workflow (workflowId = video-<jobId>). */
export function temporalWorkflowUrl(config: AppDeps['config'], jobId: string): string {
  const ui = config.temporalUiUrl.replace(/\/+$/, '');
  const namespace = encodeURIComponent(config.temporalNamespace);
  return `${ui}/namespaces/${namespace}/workflows/${encodeURIComponent(`video-${jobId}`)}`;
}

/** Operator pages: accounts with balances, top-ups, logins, a customer's jobs. Operator sessions only. */
export function mountOperatorApi(r: Router<GatewayState>, deps: AppDeps): void {
  const auth = [sameOrigin(deps), requireSession(deps), requireOperator(), requireCsrf()];
  const body = jsonBody(16 * 1024);

  r.get('/console/api/admin/accounts', route('/console/api/admin/accounts'), ...auth, async (ctx) => {
    ctx.body = { data: await listAccounts(deps.db) };
  });

  r.post('/console/api/admin/accounts', route('/console/api/admin/accounts'), ...auth, body, async (ctx) => {
    const name = stringField(ctx.request.body as Record<string, unknown>, 'name', { min: 1, max: 200 });
    const id = await createAccount(deps.db, name);
    ctx.status = 201;
    ctx.body = await getAccount(deps.db, id);
  });

  r.get('/console/api/admin/accounts/:id', route('/console/api/admin/accounts/:id'), ...auth, async (ctx) => {
    const id = uuidParam(ctx.params.id, 'id');
    await deps.credit.flush();
    const [acc, ledger, logins, uncollected] = await Promise.all([
      getAccount(deps.db, id),
      balanceWithLedger(deps.db, id, 20),
      listLogins(deps.db, id),
      accountShortfalls(deps.db, id),
    ]);
    if (!acc || !ledger) throw notFound('No such account.');
    ctx.body = { ...acc, ledger: ledger.ledger, logins, uncollected };
  });

  r.post(
    '/console/api/admin/accounts/:id/topups',
    route('/console/api/admin/accounts/:id/topups'),
    ...auth,
    body,
    async (ctx) => {
      const id = uuidParam(ctx.params.id, 'id');
      const b = ctx.request.body as Record<string, unknown>;
      const amount = b.amount;
      if (typeof amount !== 'number' || !Number.isSafeInteger(amount) || amount < 1 || amount > MAX_TOP_UP_VND) {
        throw badRequest(`amount must be a whole number of VND from 1 to ${MAX_TOP_UP_VND}`, 'amount');
      }
      const reason = stringField(b, 'reason', { min: 1, max: 500 });
      const key = stringField(b, 'idempotencyKey', { min: 8, max: 100 });
      if (!/^[\w-]+$/.test(key))
        throw badRequest('idempotencyKey may contain only letters, digits, _ and -', 'idempotencyKey');
      if (!(await getAccount(deps.db, id))) throw notFound('No such account.');
      const who = sessionOf(ctx).email;
      // The key comes from the form, so a double submit (or a retried request) is one top-up.
      const { applied } = await topUp(deps.db, {
        accountId: id,
        amount,
        idempotencyKey: `console-topup:${id}:${key}`,
        memo: `${reason} (by ${who})`,
        refType: 'console_topup',
        refId: key,
      });
      ctx.status = applied ? 201 : 200;
      ctx.body = { applied, account: await getAccount(deps.db, id) };
    },
  );

  r.get('/console/api/admin/accounts/:id/keys', route('/console/api/admin/accounts/:id/keys'), ...auth, async (ctx) => {
    const view = await keysWithControls(deps, uuidParam(ctx.params.id, 'id'));
    if (!view) throw notFound('No such account.');
    ctx.body = view;
  });

  // The account's defaults for keys without their own limits.
  r.patch(
    '/console/api/admin/accounts/:id/limits',
    route('/console/api/admin/accounts/:id/limits'),
    ...auth,
    body,
    async (ctx) => {
      const id = uuidParam(ctx.params.id, 'id');
      const patch = parseLimitsPatch(ctx.request.body, { expiry: false });
      const saved = await setAccountLimits(deps.db, id, patch, deps.config.keyCacheMs);
      if (!saved) throw notFound('No such account.');
      await untilBudgetBinds(saved);
      ctx.body = await keysWithControls(deps, id);
    },
  );

  r.patch(
    '/console/api/admin/accounts/:id/keys/:keyId/limits',
    route('/console/api/admin/accounts/:id/keys/:keyId/limits'),
    ...auth,
    body,
    async (ctx) => {
      const id = uuidParam(ctx.params.id, 'id');
      const keyId = uuidParam(ctx.params.keyId, 'keyId');
      const patch = parseLimitsPatch(ctx.request.body, { expiry: true });
      const saved = await setKeyLimits(deps.db, id, keyId, patch, deps.config.keyCacheMs);
      if (!saved) throw notFound('No such API key on this account.');
      await untilBudgetBinds(saved);
      ctx.body = (await keysWithControls(deps, id))!.data.find((k) => k.id === keyId);
    },
  );

  r.post('/console/api/admin/logins', route('/console/api/admin/logins'), ...auth, body, async (ctx) => {
    const b = ctx.request.body as Record<string, unknown>;
    const role = b.role === undefined || b.role === '' ? 'customer' : b.role;
    if (role !== 'customer' && role !== 'operator') throw badRequest('role must be customer or operator', 'role');
    const email = requiredString(b, 'email');
    const password = requiredString(b, 'password');
    try {
      const login = await createLogin(deps.db, {
        accountId: uuidParam(b.accountId, 'accountId'),
        email,
        password,
        role,
      });
      ctx.status = 201;
      ctx.body = login;
    } catch (e) {
      if (e instanceof ConsoleUserError) {
        const param = e.param === 'account_id' ? 'accountId' : e.param;
        if (e.code === 'exists') throw new ApiError(409, e.message, 'invalid_request_error', param, 'login_exists');
        if (e.code === 'not_found') throw notFound(e.message, 'not_found', param);
        throw badRequest(e.message, param);
      }
      throw e;
    }
  });

  r.get('/console/api/admin/accounts/:id/jobs', route('/console/api/admin/accounts/:id/jobs'), ...auth, async (ctx) => {
    const id = uuidParam(ctx.params.id, 'id');
    const status = jobStatusParam(ctx.query.status);
    const limit = intParam(ctx.query.limit, 'limit', 50, 1, 200);
    const jobs = await listJobs(deps.db, redactorFor(deps.catalog), id, { status, limit });
    ctx.body = { data: jobs.map((j) => ({ ...j, temporalUrl: temporalWorkflowUrl(deps.config, j.id) })) };
  });
}
