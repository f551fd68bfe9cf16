import type Router from '@koa/router';
import type { AppDeps } from '../../operations';
import type { GatewayState } from '../middleware';
import { apiRoutes } from '../route';
import { modelNotFound } from '../../errors';
import { publicModel, type ModelConfig } from '../../catalog';
import { geminiModelGet, geminiModelList, geminiOrOpenAI } from '../gemini';

/** GET /v1/models (auth, OpenAI list shape plus mode and VND pricing) and GET /public/models (no auth). */
export function modelsRouter(deps: AppDeps): Router<GatewayState> {
  const api = apiRoutes(deps, { shape: geminiOrOpenAI });
  const created = Math.floor(Date.now() / 1000);
  // Rendered per request: the prices in force change with their versions (src/billing/priceBook.ts).
  const render = (m: ModelConfig) =>
    publicModel(m, created, deps.catalog.ownerOf(m), deps.catalog.patternsOf(m), deps.prices?.pricesOf(m.id));
  const listed = () => ({ object: 'list', data: deps.catalog.models.map(render) });
  api.add({
    method: 'GET',
    path: '/public/models',
    shape: 'openai',
    auth: 'none',
    handler: (ctx) => {
      ctx.set('cache-control', 'public, max-age=60');
      ctx.body = listed();
    },
  });
  api.add({
    method: 'GET',
    path: '/v1/models',
    handler: (ctx) => {
      ctx.body = ctx.state.errorShape === 'gemini' ? geminiModelList(deps.catalog, ctx.query) : listed();
    },
  });
  api.add({
    method: 'GET',
    path: '/v1/models/:model',
    handler: (ctx) => {
      if (ctx.state.errorShape === 'gemini') return void (ctx.body = geminiModelGet(deps.catalog, ctx.params.model));
      const m = deps.catalog.get(ctx.params.model);
      if (!m) throw modelNotFound(ctx.params.model);
      ctx.body = render(m);
    },
  });
  return api.router;
}
