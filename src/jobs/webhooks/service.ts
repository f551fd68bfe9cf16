import type { AppDeps } from '../../operations';
import { ApiError, badRequest, notFound } from '../../errors';
import { clip } from '../../text';
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
} from './endpoints';
import { deliveryView, listDeliveries } from './repo';
import { resendDelivery } from './start';
import { webhookTaskQueue } from './settings';

/**
 * What an account can do with its webhooks, checked and answered in the API's shapes: one implementation behind
 * /v1/webhooks (API keys) and the console (sessions).
 */

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function webhookService(deps: Pick<AppDeps, 'db' | 'config' | 'temporal'>) {
  const s = deps.config.webhooks;
  const own = async (accountId: string, id: unknown): Promise<WebhookEndpoint> => {
    const e = typeof id === 'string' && UUID.test(id) ? await getEndpoint(deps.db, accountId, id.toLowerCase()) : null;
    if (!e) throw notFound(`No webhook endpoint found with id '${clip(String(id))}'.`, 'webhook_not_found', 'id');
    return e;
  };
  return {
    async create(accountId: string, body: unknown): Promise<Record<string, unknown>> {
      if (!body || typeof body !== 'object' || Array.isArray(body)) throw badRequest('The body must be a JSON object.');
      const o = body as Record<string, unknown>;
      const unknown = Object.keys(o).find((k) => !['url', 'events', 'description'].includes(k));
      if (unknown !== undefined)
        throw badRequest(`Unknown parameter '${clip(unknown)}'.`, clip(unknown), 'unknown_parameter');
      const events = parseEventTypes(o.events);
      const description = checkDescription(o.description);
      const url = await checkEndpointUrl(o.url, s);
      const { endpoint, secret } = await createEndpoint(
        deps.db,
        accountId,
        { url, events, description },
        s.maxEndpoints,
      );
      return endpointView(endpoint, secret);
    },
    async list(accountId: string) {
      return { object: 'list', data: (await listEndpoints(deps.db, accountId)).map((e) => endpointView(e)) };
    },
    async get(accountId: string, id: unknown) {
      return endpointView(await own(accountId, id));
    },
    async remove(accountId: string, id: unknown) {
      const e = await own(accountId, id);
      await deleteEndpoint(deps.db, accountId, e.id);
      return { id: e.id, object: 'webhook_endpoint.deleted', deleted: true };
    },
    async rotate(accountId: string, id: unknown) {
      const e = await own(accountId, id);
      const rotated = await rotateSecret(deps.db, accountId, e.id, s.rotationGraceMs);
      if (!rotated) throw notFound(`No webhook endpoint found with id '${e.id}'.`, 'webhook_not_found', 'id');
      return endpointView(rotated.endpoint, rotated.secret);
    },
    /** Recent deliveries, newest first: `limit` 1-100 (default 20), `after` the last id of the previous page. */
    async deliveries(accountId: string, id: unknown, q: { limit?: unknown; after?: unknown }) {
      const e = await own(accountId, id);
      const { limit, after } = q;
      if (
        limit !== undefined &&
        (typeof limit !== 'string' || !/^\d{1,3}$/.test(limit) || +limit < 1 || +limit > 100)
      ) {
        throw badRequest("Invalid 'limit': an integer from 1 to 100.", 'limit');
      }
      if (after !== undefined && (typeof after !== 'string' || !UUID.test(after)))
        throw badRequest("Invalid 'after': the id of a delivery.", 'after');
      const { data, hasMore } = await listDeliveries(deps.db, e.id, limit === undefined ? 20 : Number(limit), after);
      return {
        object: 'list',
        data: data.map(deliveryView),
        first_id: data[0]?.id ?? null,
        last_id: data.at(-1)?.id ?? null,
        has_more: hasMore,
      };
    },
    /** Sends a delivery again now (with the same webhook-id); 429 past the account's or the delivery's resend limit. */
    async resend(accountId: string, id: unknown, deliveryId: unknown) {
      const e = await own(accountId, id);
      if (!deps.temporal)
        throw new ApiError(
          503,
          'Webhook delivery is not available on this server.',
          'server_error',
          null,
          'temporal_unavailable',
        );
      const ref =
        typeof deliveryId === 'string' && UUID.test(deliveryId)
          ? await resendDelivery(deps.db, deps.temporal, webhookTaskQueue(deps.config), s, {
              accountId,
              endpointId: e.id,
              deliveryId: deliveryId.toLowerCase(),
            })
          : null;
      if (!ref)
        throw notFound(
          `No delivery found with id '${clip(String(deliveryId))}' on this endpoint.`,
          'delivery_not_found',
          'delivery_id',
        );
      return { id: ref.deliveryId, object: 'webhook_delivery', status: 'pending' };
    },
  };
}
