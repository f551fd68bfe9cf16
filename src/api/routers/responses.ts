import Router from '@koa/router';
import type { AppDeps } from '../deps';
import { jsonBody, requireApiKey, route, type GatewayState } from '../middleware';
import { notFound } from '../../errors';
import { fitOutputCap } from '../../catalog/outputCap';
import { validateResponses } from '../../schemas/responses';
import { loadResponse } from '../responses/storedResponses';
import { createResponse } from '../responses/create';
import { clip } from '../../text/clip';

/**
 * POST /v1/responses and GET /v1/responses/{id}: the OpenAI Responses interface for any chat model.
 * A model marked `api: "responses"` in the catalog is passed through to its upstream's /responses natively (SSE
 * forwarded as produced); any other chat model is translated to chat and back (src/translate), its chat request
 * sent to /chat/completions or, for a model of an Anthropic provider, bridged to /v1/messages
 * (src/providers/chatBackends.ts). The request: src/api/responses/create.ts (continuations), native.ts and
 * translated.ts (the two paths), turn.ts (a turn and how it is stored).
 *
 * State lives in the gateway for both paths: a response is stored unless `store: false`, and continued with
 * `previous_response_id` on any model.
 */

export function responsesRouter(deps: AppDeps): Router<GatewayState> {
  const router = new Router<GatewayState>();
  const auth = requireApiKey(deps);

  router.post('/v1/responses', route('/v1/responses'), auth, jsonBody(deps.config.maxJsonBytes), async (ctx) => {
    const req = ctx.request.body as unknown;
    validateResponses(req);
    const model = deps.catalog.require(req.model, 'chat');
    ctx.state.model = model.id;
    req.max_output_tokens = fitOutputCap(ctx, model, req.model, req.max_output_tokens);
    await createResponse(ctx, deps, model, req);
  });

  router.get('/v1/responses/:id', route('/v1/responses/:id'), auth, async (ctx) => {
    const r = await loadResponse(deps.db, ctx.state.principal!.accountId, ctx.params.id);
    if (!r) throw notFound(`Response with id '${clip(ctx.params.id)}' not found.`, 'not_found', 'id');
    ctx.body = r;
  });

  return router;
}
