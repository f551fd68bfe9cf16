import Router from '@koa/router';
import type { AppDeps } from '../../operations';
import { jsonBody, requireApiKey, route, type Ctx, type GatewayState } from '../middleware';
import { webhookService } from '../../webhooks/service';

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
  const r = new Router<GatewayState>();
  const auth = requireApiKey(deps);
  const hooks = webhookService(deps);
  const account = (ctx: Ctx) => ctx.state.principal!.accountId;

  r.post('/v1/webhooks', route('/v1/webhooks'), auth, jsonBody(16 * 1024), async (ctx) => {
    ctx.body = await hooks.create(account(ctx), ctx.request.body);
    ctx.status = 201;
  });
  r.get('/v1/webhooks', route('/v1/webhooks'), auth, async (ctx) => {
    ctx.body = await hooks.list(account(ctx));
  });
  r.get('/v1/webhooks/:id', route('/v1/webhooks/:id'), auth, async (ctx) => {
    ctx.body = await hooks.get(account(ctx), ctx.params.id);
  });
  r.delete('/v1/webhooks/:id', route('/v1/webhooks/:id'), auth, async (ctx) => {
    ctx.body = await hooks.remove(account(ctx), ctx.params.id);
  });
  r.post('/v1/webhooks/:id/rotate_secret', route('/v1/webhooks/:id/rotate_secret'), auth, async (ctx) => {
    ctx.body = await hooks.rotate(account(ctx), ctx.params.id);
  });
  r.get('/v1/webhooks/:id/deliveries', route('/v1/webhooks/:id/deliveries'), auth, async (ctx) => {
    ctx.body = await hooks.deliveries(account(ctx), ctx.params.id, ctx.query);
  });
  r.post(
    '/v1/webhooks/:id/deliveries/:did/resend',
    route('/v1/webhooks/:id/deliveries/:did/resend'),
    auth,
    async (ctx) => {
      ctx.body = await hooks.resend(account(ctx), ctx.params.id, ctx.params.did);
      ctx.status = 202;
    },
  );
  return r;
}
