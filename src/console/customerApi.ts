import type Router from '@koa/router';
import type { AppDeps } from '../operations';
import { jsonBody, route, type GatewayState } from '../api/middleware';
import { badRequest, notFound } from '../errors';
import { createApiKey, revokeApiKey } from '../auth';
import { parseLimitsPatch, setKeyLimits, untilBudgetBinds } from '../limits';
import { keysWithControls } from './keyControls';
import { requireCsrf, requireSession, sameOrigin, sessionOf } from './auth';
import { balanceWithLedger, usageByDayAndModel, usageRecord } from './queries';
import { dateParam, intParam, optionalIntParam, stringField, timeZoneParam, uuidParam } from './params';
import { getJob, JOB_STATUSES, listJobs, type JobStatus } from './jobs';
import { PG_ERROR, pgErrorCode } from '../db';
import { redactorFor } from '../catalog';
import { clipJson } from '../text';

const MAX_USAGE_DAYS = 366;

/** The signed-in account's own pages: API keys, balance and ledger, usage, requests, video jobs. */
export function mountCustomerApi(r: Router<GatewayState>, deps: AppDeps): void {
  const auth = [sameOrigin(deps), requireSession(deps), requireCsrf()];
  const body = jsonBody(16 * 1024);
  const redact = redactorFor(deps.catalog);

  r.get('/console/api/keys', route('/console/api/keys'), ...auth, async (ctx) => {
    const view = await keysWithControls(deps, sessionOf(ctx).accountId);
    if (!view) throw notFound('Account not found.');
    ctx.body = view;
  });

  // A key's limits and expiry (fields absent: unchanged; null: cleared, so the account default applies).
  r.patch('/console/api/keys/:id/limits', route('/console/api/keys/:id/limits'), ...auth, body, async (ctx) => {
    const id = uuidParam(ctx.params.id, 'id');
    const patch = parseLimitsPatch(ctx.request.body, { expiry: true });
    const accountId = sessionOf(ctx).accountId;
    const saved = await setKeyLimits(deps.db, accountId, id, patch, deps.config.keyCacheMs);
    if (!saved) throw notFound('No such API key.');
    await untilBudgetBinds(saved);
    ctx.body = (await keysWithControls(deps, accountId))!.data.find((k) => k.id === id);
  });

  r.post('/console/api/keys', route('/console/api/keys'), ...auth, body, async (ctx) => {
    const name = stringField(ctx.request.body as Record<string, unknown>, 'name', { min: 1, max: 100 });
    const k = await createApiKey(deps.db, sessionOf(ctx).accountId, name);
    ctx.status = 201;
    ctx.body = { key: { ...k, lastUsedAt: null, revokedAt: null } };
  });

  r.delete('/console/api/keys/:id', route('/console/api/keys/:id'), ...auth, async (ctx) => {
    const id = uuidParam(ctx.params.id, 'id');
    if (!(await revokeApiKey(deps.db, sessionOf(ctx).accountId, id))) throw notFound('No such active API key.');
    ctx.body = { id, revoked: true };
  });

  r.get('/console/api/balance', route('/console/api/balance'), ...auth, async (ctx) => {
    const limit = intParam(ctx.query.limit, 'limit', 50, 1, 200);
    const before = optionalIntParam(ctx.query.before, 'before', 1, Number.MAX_SAFE_INTEGER);
    await deps.credit.flush(); // include this process's charges that are still queued
    const out = await balanceWithLedger(deps.db, sessionOf(ctx).accountId, limit, before);
    if (!out) throw notFound('Account not found.');
    ctx.body = out;
  });

  r.get('/console/api/requests/:id', route('/console/api/requests/:id'), ...auth, async (ctx) => {
    const id = uuidParam(ctx.params.id, 'id');
    await deps.credit.flush();
    const u = await usageRecord(deps.db, sessionOf(ctx).accountId, id);
    if (!u) throw notFound('No such request on this account.');
    ctx.body = u;
  });

  r.get('/console/api/usage', route('/console/api/usage'), ...auth, async (ctx) => {
    const from = dateParam(ctx.query.from, 'from');
    const to = dateParam(ctx.query.to, 'to');
    const tz = timeZoneParam(ctx.query.tz, 'Asia/Ho_Chi_Minh');
    const days = (Date.parse(to) - Date.parse(from)) / 86_400_000 + 1;
    if (days < 1) throw badRequest('from must not be after to', 'from');
    if (days > MAX_USAGE_DAYS) throw badRequest(`the range must be at most ${MAX_USAGE_DAYS} days`, 'to');
    await deps.credit.flush();
    let rows;
    try {
      rows = await usageByDayAndModel(deps.db, sessionOf(ctx).accountId, from, to, tz);
    } catch (e: any) {
      if (pgErrorCode(e) === PG_ERROR.invalidParameterValue)
        throw badRequest(`unknown time zone ${clipJson(tz)}`, 'tz');
      throw e;
    }
    ctx.body = { from, to, tz, rows };
  });

  r.get('/console/api/jobs', route('/console/api/jobs'), ...auth, async (ctx) => {
    const status = jobStatusParam(ctx.query.status);
    const limit = intParam(ctx.query.limit, 'limit', 50, 1, 200);
    ctx.body = { data: await listJobs(deps.db, redact, sessionOf(ctx).accountId, { status, limit }) };
  });

  r.get('/console/api/jobs/:id', route('/console/api/jobs/:id'), ...auth, async (ctx) => {
    const job = await getJob(deps.db, redact, sessionOf(ctx).accountId, uuidParam(ctx.params.id, 'id'));
    if (!job) throw notFound('No such video job on this account.');
    ctx.body = job;
  });
}

export function jobStatusParam(v: unknown): JobStatus | undefined {
  if (v === undefined || v === '') return undefined;
  if (typeof v !== 'string' || !(JOB_STATUSES as readonly string[]).includes(v))
    throw badRequest(`status must be one of ${JOB_STATUSES.join(', ')}`, 'status');
  return v as JobStatus;
}
