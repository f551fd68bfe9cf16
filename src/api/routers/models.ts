import Router from '@koa/router';
import type { AppDeps } from '../deps';
import { requireApiKey, route, type GatewayState } from '../middleware';
import { modelNotFound } from '../../errors';
import { publicModel } from '../../catalog/catalog';

/** GET /v1/models (auth, OpenAI list shape plus mode and VND pricing) and GET /public/models (no auth). */
export function modelsRouter(deps: AppDeps): Router<GatewayState> {
  const r = new Router<GatewayState>();
  const created = Math.floor(Date.now() / 1000);
  // The catalog is immutable for the process lifetime: render the lists once.
  const list = { object: 'list', data: deps.catalog.models.map((m) => publicModel(m, created, deps.catalog.ownerOf(m), deps.catalog.patternsOf(m))) };
  const byId = new Map(list.data.map((m) => [m.id, m] as const));
  r.get('/public/models', route('/public/models'), (ctx) => {
    ctx.set('cache-control', 'public, max-age=60');
    ctx.body = list;
  });
  r.get('/v1/models', route('/v1/models'), requireApiKey(deps), (ctx) => {
    ctx.body = list;
  });
  r.get('/v1/models/:model', route('/v1/models/:model'), requireApiKey(deps), (ctx) => {
    const m = deps.catalog.get(ctx.params.model);
    if (!m) throw modelNotFound(ctx.params.model);
    ctx.body = byId.get(m.id);
  });
  return r;
}
