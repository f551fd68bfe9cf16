import type Router from '@koa/router';
import type { AppDeps } from '../../operations';
import type { GatewayState } from '../middleware';
import { apiRoutes } from '../route';
import { badRequest, notFound } from '../../errors';
import { getBalance, listLedger, breakdownOfUnits, listUsageRecords } from '../../billing';

function limitParam(v: unknown, def: number, max: number): number {
  if (v === undefined) return def;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1 || n > max) throw badRequest(`limit must be an integer from 1 to ${max}`, 'limit');
  return n;
}

/** The caller's balance, held funds, ledger and usage records, in integer VND. */
export function accountRouter(deps: AppDeps): Router<GatewayState> {
  const api = apiRoutes(deps, { shape: 'openai' });
  api.add({
    method: 'GET',
    path: '/v1/account',
    handler: async (ctx) => {
      const accountId = ctx.state.principal!.accountId;
      const limit = limitParam(ctx.query.limit, 20, 100);
      await deps.credit.flush(); // show this process's charges that are still queued
      const [bal, ledger] = await Promise.all([getBalance(deps.db, accountId), listLedger(deps.db, accountId, limit)]);
      if (!bal) throw notFound('account not found');
      ctx.body = {
        object: 'account',
        id: accountId,
        currency: 'VND',
        balance_vnd: bal.balance,
        held_vnd: bal.held,
        available_vnd: bal.available,
        ledger: ledger.map((e) => ({
          id: e.id,
          type: e.kind,
          amount_vnd: e.amount,
          hold_id: e.holdId,
          ref_type: e.refType,
          ref_id: e.refId,
          memo: e.memo,
          created_at: Math.floor(Date.parse(e.createdAt) / 1000),
        })),
      };
    },
  });
  api.add({
    method: 'GET',
    path: '/v1/usage',
    handler: async (ctx) => {
      const accountId = ctx.state.principal!.accountId;
      const limit = limitParam(ctx.query.limit, 50, 1000);
      await deps.credit.flush();
      const rows = await listUsageRecords(deps.db, accountId, limit);
      ctx.body = {
        object: 'list',
        data: rows.map((u) => {
          // Token operations also get their bill's breakdown: each field is priced on its own (docs/billing.md,
          // cache pricing).
          const tokens = breakdownOfUnits(u.units);
          return {
            id: u.id,
            api_key_id: u.api_key_id,
            model: u.model,
            operation: u.operation,
            units: u.units,
            ...(tokens ? { tokens } : {}),
            cost_vnd: u.cost_vnd,
            latency_ms: u.latency_ms,
            status: u.status,
            ...(u.routing ? { routing: u.routing } : {}),
            created_at: Math.floor(u.created_at.getTime() / 1000),
          };
        }),
      };
    },
  });
  return api.router;
}
