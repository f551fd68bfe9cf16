import type Router from '@koa/router';
import type { AppDeps } from '../../operations';
import { receivedJsonText, type Ctx, type GatewayState } from '../middleware';
import { apiRoutes } from '../route';
import { listQuery } from '../listQuery';
import { ORDER_ID, topupService } from '../../jobs/topups';

/**
 * Top-ups (docs/payments.md). The customer's orders, with the API-key auth of the rest of /v1:
 *   POST /v1/topups                      {amount, method: vietqr|vnpay} -> 201, the order (QR, or VNPay's URL)
 *   GET  /v1/topups                      the account's orders, newest first (limit, after, order)
 *   GET  /v1/topups/{id}                 one order (another account's: 404)
 *   GET  /v1/balance_alert, POST {low_balance_threshold}   the balance.low webhook's threshold (null: none)
 * The payment notifications, authenticated by their own key or signature (no API key):
 *   POST /v1/payments/sepay/webhook      SePay's bank feed (Authorization: Apikey <SEPAY_WEBHOOK_API_KEY>, or
 *                                        X-SePay-Signature: HMAC-SHA256 under SEPAY_WEBHOOK_SECRET)
 *   POST /v1/payments/casso/webhook      Casso's bank feed v2 (X-Casso-Signature under CASSO_WEBHOOK_SECRET)
 *   GET  /v1/payments/vnpay/ipn          VNPay's IPN ({RspCode, Message})
 *   GET  /v1/payments/vnpay/return       the customer back from VNPay: to the console's top-up page
 */
export function topupsRouter(deps: AppDeps): Router<GatewayState> {
  const api = apiRoutes(deps, { shape: 'openai' });
  const topups = topupService(deps);
  const account = (ctx: Ctx) => ctx.state.principal!.accountId;

  api.add({
    method: 'POST',
    path: '/v1/topups',
    body: { json: 16 * 1024 },
    handler: async (ctx, body) => {
      ctx.body = await topups.create(account(ctx), body, ctx.ip);
      ctx.status = 201;
    },
  });
  api.add({
    method: 'GET',
    path: '/v1/topups',
    handler: async (ctx) => {
      const q = listQuery(ctx, { maxLimit: 100, defaultLimit: 20, idPattern: ORDER_ID, what: 'a top-up' });
      ctx.body = await topups.list(account(ctx), q);
    },
  });
  api.add({
    method: 'GET',
    path: '/v1/topups/:id',
    handler: async (ctx) => {
      ctx.body = await topups.get(account(ctx), ctx.params.id);
    },
  });

  api.add({
    method: 'GET',
    path: '/v1/balance_alert',
    handler: async (ctx) => {
      ctx.body = await topups.alert(account(ctx));
    },
  });
  api.add({
    method: 'POST',
    path: '/v1/balance_alert',
    body: { json: 4 * 1024 },
    handler: async (ctx, body) => {
      ctx.body = await topups.setAlert(account(ctx), body);
    },
  });

  // The payment notifications: no API key, each authenticated by its provider's key or signature.
  api.add({
    method: 'POST',
    path: '/v1/payments/sepay/webhook',
    auth: 'none',
    body: { json: 64 * 1024, keepText: true },
    handler: async (ctx, body) => {
      ctx.body = await topups.sepayWebhook(ctx.get('authorization') || undefined, body, {
        signature: ctx.get('x-sepay-signature') || undefined,
        timestamp: ctx.get('x-sepay-timestamp') || undefined,
        rawBody: receivedJsonText(ctx.req),
      });
    },
  });
  api.add({
    method: 'POST',
    path: '/v1/payments/casso/webhook',
    auth: 'none',
    body: { json: 256 * 1024 },
    handler: async (ctx, body) => {
      ctx.body = await topups.cassoWebhook(ctx.get('x-casso-signature') || undefined, body);
    },
  });
  api.add({
    method: 'GET',
    path: '/v1/payments/vnpay/ipn',
    auth: 'none',
    handler: async (ctx) => {
      try {
        ctx.body = await topups.vnpayIpn(ctx.query);
      } catch (e) {
        deps.logger.error({ err: (e as Error).message }, 'VNPay IPN not recorded');
        ctx.body = { RspCode: '99', Message: 'Unknown error' };
      }
    },
  });
  api.add({
    method: 'GET',
    path: '/v1/payments/vnpay/return',
    auth: 'none',
    handler: (ctx) => {
      ctx.redirect(topups.vnpayReturn(ctx.query));
    },
  });
  return api.router;
}
