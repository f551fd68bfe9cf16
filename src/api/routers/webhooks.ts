import Router from '@koa/router';
import type { AppDeps } from '../deps';
import { jsonBody, requireApiKey, route, type Ctx, type GatewayState } from '../middleware';
import { ApiError, badRequest, notFound } from '../../errors';
import {
  checkDescription,
  checkEndpointUrl,
  createEndpoint,
  deleteEndpoint,
  endpointView,
  getEndpoint,
  listEndpoints,
  parseEventTypes,
  rotateSecret,
  type WebhookEndpoint,
} from '../../webhooks/endpoints';
import { deliveryView, listDeliveries } from '../../webhooks/events';
import { resendDelivery } from '../../webhooks/start';

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

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function webhooksRouter(deps: AppDeps): Router<GatewayState> {
  const r = new Router<GatewayState>();
  const auth = requireApiKey(deps);
  const body = jsonBody(16 * 1024);
  const s = deps.config.webhooks;
  const accountOf = (ctx: Ctx) => ctx.state.principal!.accountId;

  const own = async (ctx: Ctx): Promise<WebhookEndpoint> => {
    const id = ctx.params.id;
    const e = UUID.test(id) ? await getEndpoint(deps.db, accountOf(ctx), id.toLowerCase()) : null;
    if (!e)
      throw notFound(`No webhook endpoint found with id '${String(id).slice(0, 256)}'.`, 'webhook_not_found', 'id');
    return e;
  };

  r.post('/v1/webhooks', route('/v1/webhooks'), auth, body, async (ctx) => {
    const b = ctx.request.body;
    if (!b || typeof b !== 'object' || Array.isArray(b)) throw badRequest('The body must be a JSON object.');
    const o = b as Record<string, unknown>;
    const unknown = Object.keys(o).find((k) => !['url', 'events', 'description'].includes(k));
    if (unknown !== undefined)
      throw badRequest(`Unknown parameter '${unknown.slice(0, 256)}'.`, unknown.slice(0, 256), 'unknown_parameter');
    const events = parseEventTypes(o.events);
    const description = checkDescription(o.description);
    const url = await checkEndpointUrl(o.url, s);
    const { endpoint, secret } = await createEndpoint(
      deps.db,
      accountOf(ctx),
      { url, events, description },
      s.maxEndpoints,
    );
    ctx.status = 201;
    ctx.body = endpointView(endpoint, secret);
  });

  r.get('/v1/webhooks', route('/v1/webhooks'), auth, async (ctx) => {
    ctx.body = { object: 'list', data: (await listEndpoints(deps.db, accountOf(ctx))).map((e) => endpointView(e)) };
  });

  r.get('/v1/webhooks/:id', route('/v1/webhooks/:id'), auth, async (ctx) => {
    ctx.body = endpointView(await own(ctx));
  });

  r.delete('/v1/webhooks/:id', route('/v1/webhooks/:id'), auth, async (ctx) => {
    const e = await own(ctx);
    await deleteEndpoint(deps.db, accountOf(ctx), e.id);
    ctx.body = { id: e.id, object: 'webhook_endpoint.deleted', deleted: true };
  });

  r.post('/v1/webhooks/:id/rotate_secret', route('/v1/webhooks/:id/rotate_secret'), auth, async (ctx) => {
    const e = await own(ctx);
    const rotated = await rotateSecret(deps.db, accountOf(ctx), e.id, s.rotationGraceMs);
    if (!rotated) throw notFound(`No webhook endpoint found with id '${e.id}'.`, 'webhook_not_found', 'id');
    ctx.body = endpointView(rotated.endpoint, rotated.secret);
  });

  r.get('/v1/webhooks/:id/deliveries', route('/v1/webhooks/:id/deliveries'), auth, async (ctx) => {
    const e = await own(ctx);
    const limitRaw = ctx.query.limit;
    if (
      limitRaw !== undefined &&
      (typeof limitRaw !== 'string' || !/^\d{1,3}$/.test(limitRaw) || +limitRaw < 1 || +limitRaw > 100)
    ) {
      throw badRequest("Invalid 'limit': an integer from 1 to 100.", 'limit');
    }
    const after = ctx.query.after;
    if (after !== undefined && (typeof after !== 'string' || !UUID.test(after)))
      throw badRequest("Invalid 'after': the id of a delivery.", 'after');
    const { data, hasMore } = await listDeliveries(
      deps.db,
      e.id,
      limitRaw === undefined ? 20 : Number(limitRaw),
      after,
    );
    ctx.body = {
      object: 'list',
      data: data.map(deliveryView),
      first_id: data[0]?.id ?? null,
      last_id: data.at(-1)?.id ?? null,
      has_more: hasMore,
    };
  });

  r.post(
    '/v1/webhooks/:id/deliveries/:did/resend',
    route('/v1/webhooks/:id/deliveries/:did/resend'),
    auth,
    async (ctx) => {
      const e = await own(ctx);
      const did = ctx.params.did;
      if (!deps.temporal)
        throw new ApiError(
          503,
          'Webhook delivery is not available on this server.',
          'server_error',
          null,
          'temporal_unavailable',
        );
      const ref = UUID.test(did)
        ? await resendDelivery(deps.db, deps.temporal, deps.config.temporalTaskQueue, s, {
            accountId: accountOf(ctx),
            endpointId: e.id,
            deliveryId: did.toLowerCase(),
          })
        : null;
      if (!ref)
        throw notFound(
          `No delivery found with id '${String(did).slice(0, 256)}' on this endpoint.`,
          'delivery_not_found',
          'did',
        );
      ctx.status = 202;
      ctx.body = { id: ref.deliveryId, object: 'webhook_delivery', status: 'pending' };
    },
  );

  return r;
}
