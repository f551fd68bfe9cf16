import Router from '@koa/router';
import type { AppDeps } from '../../operations';
import { requireApiKey, route, type GatewayState } from '../middleware';
import { badRequest, notFound } from '../../errors';
import { getBalance, listLedger, breakdownOfUnits } from '../../billing';

function limitParam(v: unknown, def: number, max: number): number {
  if (v === undefined) return def;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1 || n > max) throw badRequest(`limit must be an integer from 1 to ${max}`, 'limit');
  return n;
}

/** The caller's balance, held funds, ledger and usage records, in integer VND. */
export function accountRouter(deps: AppDeps): Router<GatewayState> {
  const r = new Router<GatewayState>();
  const auth = requireApiKey(deps);
  r.get('/v1/account', route('/v1/account'), auth, async (ctx) => {
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
  });
  r.get('/v1/usage', route('/v1/usage'), auth, async (ctx) => {
    const accountId = ctx.state.principal!.accountId;
    const limit = limitParam(ctx.query.limit, 50, 1000);
    await deps.credit.flush();
    const rows = await deps.db.query(
      `SELECT id, api_key_id, model, operation, units, cost_vnd, latency_ms, status, routing, created_at
       FROM usage_records
       WHERE account_id = $1 ORDER BY created_at DESC LIMIT $2`,
      [accountId, limit],
    );
    ctx.body = {
      object: 'list',
      data: rows.rows.map((u) => {
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
  });
  return r;
}
