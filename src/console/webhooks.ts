import type Router from '@koa/router';
import type { AppDeps } from '../operations';
import { jsonBody, route, type GatewayState } from '../api/middleware';
import { requireCsrf, requireSession, sameOrigin, sessionOf } from './auth';
import { webhookService } from '../webhooks/service';

/** The signed-in account's webhook endpoints and their recent deliveries, as /v1/webhooks shows them. */
export function mountWebhooksApi(r: Router<GatewayState>, deps: AppDeps): void {
  const auth = [sameOrigin(deps), requireSession(deps), requireCsrf()];
  const hooks = webhookService(deps);
  const base = '/console/api/webhooks';
  r.get(base, route(base), ...auth, async (ctx) => {
    ctx.body = await hooks.list(sessionOf(ctx).accountId);
  });
  r.post(base, route(base), ...auth, jsonBody(16 * 1024), async (ctx) => {
    ctx.body = await hooks.create(sessionOf(ctx).accountId, ctx.request.body);
    ctx.status = 201;
  });
  r.delete(`${base}/:id`, route(`${base}/:id`), ...auth, async (ctx) => {
    ctx.body = await hooks.remove(sessionOf(ctx).accountId, ctx.params.id);
  });
  r.post(`${base}/:id/rotate`, route(`${base}/:id/rotate`), ...auth, async (ctx) => {
    ctx.body = await hooks.rotate(sessionOf(ctx).accountId, ctx.params.id);
  });
  r.get(`${base}/:id/deliveries`, route(`${base}/:id/deliveries`), ...auth, async (ctx) => {
    ctx.body = await hooks.deliveries(sessionOf(ctx).accountId, ctx.params.id, ctx.query);
  });
  r.post(`${base}/:id/deliveries/:did/resend`, route(`${base}/:id/deliveries/:did/resend`), ...auth, async (ctx) => {
    ctx.body = await hooks.resend(sessionOf(ctx).accountId, ctx.params.id, ctx.params.did);
    ctx.status = 202;
  });
}
