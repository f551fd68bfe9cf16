import type Router from '@koa/router';
import type { AppDeps } from '../../operations';
import type { Ctx, GatewayState } from '../middleware';
import { apiRoutes } from '../route';
import { webhookService } from '../../jobs/webhooks';

/**
 * The caller's webhook endpoints (README "Webhooks"), with the same API-key auth as the rest of /v1:
 *   POST   /v1/webhooks                                  {url, events?, description?} -> 201, the secret shown once
 *   GET    /v1/webhooks                                  the endpoints
 *   GET    /v1/webhooks/{id}                             one endpoint
 *   DELETE /v1/webhooks/{id}                             delete it (pending deliveries stop)
 *   POST   /v1/webhooks/{id}/rotate_secret               a new secret (the old one signs too for a grace period)
 *   GET    /v1/webhooks/{id}/deliveries                  recent deliveries, newest first (limit, after)
 *   POST   /v1/webhooks/{id}/deliveries/{did}/resend     send a delivery again now
 * Another account's endpoint is a 404.
 */
export function webhooksRouter(deps: AppDeps): Router<GatewayState> {
  const api = apiRoutes(deps, { shape: 'openai' });
  const hooks = webhookService(deps);
  const account = (ctx: Ctx) => ctx.state.principal!.accountId;

  api.add({
    method: 'POST',
    path: '/v1/webhooks',
    body: { json: 16 * 1024 },
    handler: async (ctx, body) => {
      ctx.body = await hooks.create(account(ctx), body);
      ctx.status = 201;
    },
  });
  api.add({
    method: 'GET',
    path: '/v1/webhooks',
    handler: async (ctx) => {
      ctx.body = await hooks.list(account(ctx));
    },
  });
  api.add({
    method: 'GET',
    path: '/v1/webhooks/:id',
    handler: async (ctx) => {
      ctx.body = await hooks.get(account(ctx), ctx.params.id);
    },
  });
  api.add({
    method: 'DELETE',
    path: '/v1/webhooks/:id',
    handler: async (ctx) => {
      ctx.body = await hooks.remove(account(ctx), ctx.params.id);
    },
  });
  api.add({
    method: 'POST',
    path: '/v1/webhooks/:id/rotate_secret',
    handler: async (ctx) => {
      ctx.body = await hooks.rotate(account(ctx), ctx.params.id);
    },
  });
  api.add({
    method: 'GET',
    path: '/v1/webhooks/:id/deliveries',
    handler: async (ctx) => {
      ctx.body = await hooks.deliveries(account(ctx), ctx.params.id, ctx.query);
    },
  });
  api.add({
    method: 'POST',
    path: '/v1/webhooks/:id/deliveries/:did/resend',
    handler: async (ctx) => {
      ctx.body = await hooks.resend(account(ctx), ctx.params.id, ctx.params.did);
      ctx.status = 202;
    },
  });
  return api.router;
}
