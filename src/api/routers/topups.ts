import Router from '@koa/router';
import type { AppDeps } from '../../operations';
import { jsonBody, receivedJsonText, requireApiKey, route, type Ctx, type GatewayState } from '../middleware';
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
  const r = new Router<GatewayState>();
  const auth = requireApiKey(deps);
  const topups = topupService(deps);
  const account = (ctx: Ctx) => ctx.state.principal!.accountId;

  r.post('/v1/topups', route('/v1/topups'), auth, jsonBody(16 * 1024), async (ctx) => {
    ctx.body = await topups.create(account(ctx), ctx.request.body, ctx.ip);
    ctx.status = 201;
  });
  r.get('/v1/topups', route('/v1/topups'), auth, async (ctx) => {
    const q = listQuery(ctx, { maxLimit: 100, defaultLimit: 20, idPattern: ORDER_ID, what: 'a top-up' });
    ctx.body = await topups.list(account(ctx), q);
  });
  r.get('/v1/topups/:id', route('/v1/topups/:id'), auth, async (ctx) => {
    ctx.body = await topups.get(account(ctx), ctx.params.id);
  });

  r.get('/v1/balance_alert', route('/v1/balance_alert'), auth, async (ctx) => {
    ctx.body = await topups.alert(account(ctx));
  });
  r.post('/v1/balance_alert', route('/v1/balance_alert'), auth, jsonBody(4 * 1024), async (ctx) => {
    ctx.body = await topups.setAlert(account(ctx), ctx.request.body);
  });

  r.post('/v1/payments/sepay/webhook', route('/v1/payments/sepay/webhook'), jsonBody(64 * 1024, true), async (ctx) => {
    ctx.body = await topups.sepayWebhook(ctx.get('authorization') || undefined, ctx.request.body, {
      signature: ctx.get('x-sepay-signature') || undefined,
      timestamp: ctx.get('x-sepay-timestamp') || undefined,
      rawBody: receivedJsonText(ctx.req),
    });
  });
  r.post('/v1/payments/casso/webhook', route('/v1/payments/casso/webhook'), jsonBody(256 * 1024), async (ctx) => {
    ctx.body = await topups.cassoWebhook(ctx.get('x-casso-signature') || undefined, ctx.request.body);
  });
  r.get('/v1/payments/vnpay/ipn', route('/v1/payments/vnpay/ipn'), async (ctx) => {
    try {
      ctx.body = await topups.vnpayIpn(ctx.query);
    } catch (e) {
      deps.logger.error({ err: (e as Error).message }, 'VNPay IPN not recorded');
      ctx.body = { RspCode: '99', Message: 'Unknown error' };
    }
  });
  r.get('/v1/payments/vnpay/return', route('/v1/payments/vnpay/return'), async (ctx) => {
    ctx.redirect(topups.vnpayReturn(ctx.query));
  });
  return r;
}
