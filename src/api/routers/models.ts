import Router from '@koa/router';
import type { AppDeps } from '../../operations';
import { requireApiKey, route, type GatewayState } from '../middleware';
import { modelNotFound } from '../../errors';
import { publicModel, type ModelConfig } from '../../catalog';
import { geminiClientErrors, geminiModelGet, geminiModelList } from '../gemini';

/** GET /v1/models (auth, OpenAI list shape plus mode and VND pricing) and GET /public/models (no auth). */
export function modelsRouter(deps: AppDeps): Router<GatewayState> {
  const r = new Router<GatewayState>();
  const created = Math.floor(Date.now() / 1000);
  // Rendered per request: the prices in force change with their versions (src/billing/priceBook.ts).
  const render = (m: ModelConfig) =>
    publicModel(m, created, deps.catalog.ownerOf(m), deps.catalog.patternsOf(m), deps.prices?.pricesOf(m.id));
  const listed = () => ({ object: 'list', data: deps.catalog.models.map(render) });
  r.get('/public/models', route('/public/models'), (ctx) => {
    ctx.set('cache-control', 'public, max-age=60');
    ctx.body = listed();
  });
  r.get('/v1/models', route('/v1/models'), geminiClientErrors, requireApiKey(deps), (ctx) => {
    ctx.body = ctx.state.errorShape === 'gemini' ? geminiModelList(deps.catalog, ctx.query) : listed();
  });
  r.get('/v1/models/:model', route('/v1/models/:model'), geminiClientErrors, requireApiKey(deps), (ctx) => {
    if (ctx.state.errorShape === 'gemini') return void (ctx.body = geminiModelGet(deps.catalog, ctx.params.model));
    const m = deps.catalog.get(ctx.params.model);
    if (!m) throw modelNotFound(ctx.params.model);
    ctx.body = render(m);
  });
  return r;
}
